"""A wallet's nonces and holds across its unfinished transfers: the next nonce free to
sign with, what its transfers reserve of its balance, the legs waiting at or above its
mined nonce, and the holes that would keep them waiting. Transfers store and send the
legs; a wallet's own `send_transaction` signs above them (`next_free_nonce`)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

from ..backends.storage.base import Row, Transaction
from ..errors import UpstreamError
from ..evm.signing import Signed
from .transfers import CLAIMED, OPEN, sql_list

#: A transfer that failed: its legs were refused, reverted or replaced, never pending.
FAILED = sql_list(["failed"])

T = TypeVar("T")
#: Signings of one transfer's legs when another process takes the same nonces first,
#: each after a random pause of up to `CLASH_PAUSE` seconds times the attempt, so that two
#: processes streaming transfers from one wallet do not keep meeting.
SIGNING_ATTEMPTS = 10
CLASH_PAUSE = 0.02


def apart(sign_and_store: Callable[[], T]) -> T:
    """Run `sign_and_store` (read the free nonce, sign, store the legs) again while
    another process stored legs with the same nonces first (`NoncesTaken`: nothing of
    this attempt was stored or sent); the last attempt's clash is raised."""
    for attempt in range(1, SIGNING_ATTEMPTS):
        try:
            return sign_and_store()
        except NoncesTaken:
            time.sleep(random.uniform(0, CLASH_PAUSE * attempt))  # noqa: S311 (jitter)
    return sign_and_store()


class NoncesTaken(UpstreamError):
    """Another process signed with the same nonces of the wallet first: sign again.
    Nothing was stored or sent; inside a perform step it leaves the claim in flight
    (`ambiguous`), so the job signs afresh rather than abandoning the transfer."""

    def __init__(self) -> None:
        super().__init__(
            "another request signed with this wallet's nonces first; retry", ambiguous=True
        )


def next_free_nonce(tx: Transaction, chain_id: int, sender: str) -> int:
    """The nonce after every stored leg of `sender` whose transfer has not failed (0 if
    none): a new signature goes above them, whether they are sent, waiting behind a hole,
    about to be sent by their request, or mined in a block a reorg may still remove — a
    nonce is never given to a second leg while the first may still be mined."""
    row = tx.one(
        "SELECT l.nonce FROM transfer_legs l JOIN transfers t ON t.id = l.transfer_id"
        f" WHERE l.chain_id = ? AND l.sender = ? AND t.status <> {FAILED}"
        " ORDER BY l.nonce DESC LIMIT 1",
        (chain_id, sender),
    )
    return 0 if row is None else int(row["nonce"]) + 1


def reserved(
    tx: Transaction, chain_id: int, sender: str, token: str, mined: int
) -> tuple[int, int]:
    """What the unfinished transfers of `sender` hold that a balance read when `mined` of
    its transactions were mined does not yet show: raw units of `token`, and wei of gas.
    A transfer's hold ends with its moving leg (the swap or the send) mined (its nonce
    below `mined`), as the balance then shows its effect; before it is signed, it holds.
    Within `carried`, the first read per wallet and `mined` is kept, and the transfers the
    transaction adds since (`note_hold`) are counted on top of it."""
    holds = _holds.get()
    if holds is not None:
        return holds.read(tx, chain_id, sender, token, mined)
    return _reserved(tx, chain_id, sender, mined).of(token)


@dataclass
class _Held:
    """What a wallet's unfinished transfers hold: raw units by token, and wei of gas."""

    raw: dict[str, int] = field(default_factory=dict)
    wei: int = 0

    def of(self, token: str) -> tuple[int, int]:
        return self.raw.get(token, 0), self.wei


def _reserved(tx: Transaction, chain_id: int, sender: str, mined: int) -> _Held:
    rows = tx.query(
        "SELECT t.reserve_token, t.reserve_raw, t.reserve_wei, (SELECT MAX(l.nonce)"
        " FROM transfer_legs l WHERE l.transfer_id = t.id AND l.kind <> 'approval') AS moving"
        f" FROM transfers t WHERE t.chain_id = ? AND t.wallet_address = ? AND t.status IN {OPEN}"
        " AND t.reserve_raw IS NOT NULL",
        (chain_id, sender),
    )
    held = _Held()
    for row in rows:
        if row["moving"] is not None and int(row["moving"]) < mined:
            continue
        held.wei += int(row["reserve_wei"])
        token = str(row["reserve_token"])
        held.raw[token] = held.raw.get(token, 0) + int(row["reserve_raw"])
    return held


@dataclass
class Holds:
    """The holds of the wallets a claim transaction writes many transfers for (a payout
    run): each wallet's read once, then carried forward as the transaction adds its own
    transfers (`note_hold`), so that judging N transfers reads the wallet's N holds
    once, not N times. `mark` and `undo` follow a savepoint that rolls an addition back."""

    read_at: dict[tuple[int, str, int], tuple[_Held, int]] = field(default_factory=dict)
    added: list[tuple[int, str, str, int, int]] = field(default_factory=list)

    def read(
        self, tx: Transaction, chain_id: int, sender: str, token: str, mined: int
    ) -> tuple[int, int]:
        key = (chain_id, sender, mined)
        if key not in self.read_at:  # what the database shows now: this transaction's too
            self.read_at[key] = (_reserved(tx, chain_id, sender, mined), len(self.added))
        held, since = self.read_at[key]
        raw, wei = held.of(token)
        for chain, wallet, kind, amount, gas in self.added[since:]:
            if (chain, wallet) == (chain_id, sender):
                wei += gas
                raw += amount if kind == token else 0
        return raw, wei

    def mark(self) -> int:
        return len(self.added)

    def undo(self, mark: int) -> None:
        del self.added[mark:]


_holds: ContextVar[Holds | None] = ContextVar("treasury_holds", default=None)


@contextmanager
def carried() -> Iterator[Holds]:
    """Within this block (one claim transaction), `reserved` reads each wallet once and
    counts what `note_hold` adds."""
    holds = Holds()
    token = _holds.set(holds)
    try:
        yield holds
    finally:
        _holds.reset(token)


def note_hold(chain_id: int, sender: str, token: str, raw: int, wei: int) -> None:
    """A transfer holding `raw` of `token` and `wei` of `sender` was just written (in the
    transaction `carried` runs in, if any)."""
    holds = _holds.get()
    if holds is not None:
        holds.added.append((chain_id, sender, token, raw, wei))


@dataclass(frozen=True)
class Waiting:
    """A stored leg of an unfinished transfer, with what its transfer's state says of it."""

    transfer_id: str
    nonce: int
    signed: Signed
    sent: bool
    claimed: bool  # its transfer's request (or a job) may still be sending it
    lease_until: str | None
    broadcast_block: int | None = None  # the head when this version was first seen waiting


def senders_waiting(tx: Transaction, limit: int) -> list[Row]:
    """(chain_id, sender) of wallets with stored legs of unfinished transfers."""
    return tx.query(
        "SELECT DISTINCT l.chain_id, l.sender FROM transfer_legs l JOIN transfers t"
        f" ON t.id = l.transfer_id WHERE t.status IN {OPEN} ORDER BY l.chain_id, l.sender"
        " LIMIT ?",
        (limit,),
    )


def waiting(tx: Transaction, chain_id: int, sender: str, mined: int) -> list[Waiting]:
    """The stored legs of `sender` at or above nonce `mined` whose transfer has not
    failed: an unfinished transfer's, or a completed one's that a reorg took out of the
    chain (the same bytes are sent again, never a filler in its place)."""
    rows = tx.query(
        "SELECT l.transfer_id, l.nonce, l.hash, l.raw, l.sent, l.broadcast_block, t.stage,"
        " t.lease_until FROM transfer_legs l JOIN transfers t ON t.id = l.transfer_id"
        f" WHERE l.chain_id = ? AND l.sender = ? AND l.nonce >= ? AND t.status <> {FAILED}"
        " ORDER BY l.nonce",
        (chain_id, sender, mined),
    )
    return [
        Waiting(
            transfer_id=r["transfer_id"],
            nonce=int(r["nonce"]),
            signed=Signed(raw=bytes(r["raw"]), hash=r["hash"], nonce=int(r["nonce"])),
            sent=bool(r["sent"]),
            claimed=r["stage"] == CLAIMED,
            lease_until=r["lease_until"],
            broadcast_block=None if r["broadcast_block"] is None else int(r["broadcast_block"]),
        )
        for r in rows
    ]


def hole_seen(tx: Transaction, chain_id: int, sender: str, nonce: int, now: str) -> bool:
    """Note a missing nonce of `sender`; True when it was already seen at an earlier pass."""
    row = tx.one(
        "SELECT nonce FROM nonce_holes WHERE chain_id = ? AND sender = ?",
        (chain_id, sender),
    )
    if row is not None and int(row["nonce"]) == nonce:  # the job looks once a pass
        return True
    tx.execute("DELETE FROM nonce_holes WHERE chain_id = ? AND sender = ?", (chain_id, sender))
    tx.execute(
        "INSERT INTO nonce_holes (chain_id, sender, nonce, seen_at) VALUES (?, ?, ?, ?)",
        (chain_id, sender, nonce, now),
    )
    return False


def hole_closed(tx: Transaction, chain_id: int, sender: str) -> None:
    tx.execute("DELETE FROM nonce_holes WHERE chain_id = ? AND sender = ?", (chain_id, sender))


def unconfirmed_swaps(tx: Transaction, chain_id: int, sender: str, token: str, to: str) -> int:
    """Raw units of `token` that swap legs of `sender` through `to` may still spend (their
    transfer has not ended): an allowance read from the chain may already be theirs."""
    rows = tx.query(
        "SELECT l.amount FROM transfer_legs l JOIN transfers t ON t.id = l.transfer_id"
        " WHERE l.chain_id = ? AND l.sender = ? AND l.token = ? AND l.contract = ?"
        f" AND l.kind <> 'approval' AND t.status IN {OPEN}",
        (chain_id, sender, token, to),
    )
    return sum(int(row["amount"]) for row in rows)


def open_legs(tx: Transaction, chain_id: int, sender: str) -> int:
    """How many stored legs of `sender` belong to unfinished transfers: at least as many
    as are in flight, but for a completed transfer's leg a reorg took back (read without
    asking the chain)."""
    row = tx.one(
        "SELECT COUNT(*) AS n FROM transfer_legs l JOIN transfers t ON t.id = l.transfer_id"
        f" WHERE l.chain_id = ? AND l.sender = ? AND t.status IN {OPEN}",
        (chain_id, sender),
    )
    return 0 if row is None else int(row["n"])


def in_flight(tx: Transaction, chain_id: int, sender: str, mined: int) -> int:
    """How many stored legs of `sender` are in flight: at or above its mined nonce `mined`,
    of a transfer that has not failed (signed, and sent or about to be; not mined yet)."""
    row = tx.one(
        "SELECT COUNT(*) AS n FROM transfer_legs l JOIN transfers t ON t.id = l.transfer_id"
        f" WHERE l.chain_id = ? AND l.sender = ? AND l.nonce >= ? AND t.status <> {FAILED}",
        (chain_id, sender, mined),
    )
    return 0 if row is None else int(row["n"])


def topping_up(tx: Transaction, chain_id: int, station: str) -> int:
    """Wei a gas station has sent in top-ups not yet settled (its balance may not show
    them yet: they are spoken for)."""
    rows = tx.query(
        "SELECT amount FROM gas_topups WHERE chain_id = ? AND station = ? AND settled = 0",
        (chain_id, station),
    )
    return sum(int(row["amount"]) for row in rows)
