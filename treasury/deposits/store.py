"""The deposit tables: each chain's log cursor, and the deposits found (one row per log
and organization, the guard that announces each once)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ..backends.storage.base import Transaction


def cursor(tx: Transaction, chain_id: int) -> int | None:
    """The first block of the chain not scanned yet; None before the first pass."""
    row = tx.one("SELECT next_block FROM log_cursors WHERE chain_id = ?", (chain_id,))
    return None if row is None else int(row["next_block"])


def start(tx: Transaction, chain_id: int, block: int, now: str) -> None:
    """Begin watching a chain at `block` (a second starter changes nothing)."""
    tx.execute(
        "INSERT INTO log_cursors (chain_id, next_block, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (chain_id) DO NOTHING",
        (chain_id, block, now),
    )


def advance(tx: Transaction, chain_id: int, block: int, now: str) -> None:
    tx.execute(
        "UPDATE log_cursors SET next_block = ?, updated_at = ? WHERE chain_id = ?",
        (block, now, chain_id),
    )


_WATCHED = (
    "SELECT address, org_id FROM wallets WHERE deleted_at IS NULL{where}"
    " UNION ALL SELECT address, org_id FROM virtual_wallets{also}"
)


def watched_count(tx: Transaction) -> int:
    """How many (address, organization) pairs are watched: managed, tracked and virtual
    wallets."""
    row = tx.one(f"SELECT COUNT(*) AS n FROM ({_WATCHED.format(where='', also='')}) AS w")
    return 0 if row is None else int(row["n"])


def watched(tx: Transaction, addresses: Sequence[str] | None = None) -> dict[str, list[str]]:
    """The organizations watching each address: of every managed, tracked and virtual
    wallet, or of those among `addresses` (looked up by address, 500 at a time)."""
    if addresses is None:
        batches: list[Sequence[str] | None] = [None]
    else:
        unique = sorted(set(addresses))
        batches = [unique[i : i + 500] for i in range(0, len(unique), 500)]
    found: dict[str, list[str]] = defaultdict(list)
    for batch in batches:
        params: tuple[str, ...] = ()
        if batch is None:
            sql = _WATCHED.format(where="", also="")
        elif not batch:
            continue
        else:
            marks = ", ".join("?" * len(batch))
            sql = _WATCHED.format(
                where=f" AND address IN ({marks})", also=f" WHERE address IN ({marks})"
            )
            params = (*batch, *batch)
        for row in tx.query(sql, params):
            found[row["address"]].append(row["org_id"])
    return dict(found)


def caused(tx: Transaction, chain_id: int, hashes: Sequence[str]) -> set[str]:
    """Which of `hashes` the service's own transfers sent (a leg) or were paid by (an
    on-ramp's payout)."""
    found: set[str] = set()
    unique = sorted(set(hashes))
    for begin in range(0, len(unique), 500):
        chunk = unique[begin : begin + 500]
        marks = ", ".join("?" * len(chunk))
        rows = tx.query(
            f"SELECT hash FROM transfer_legs WHERE chain_id = ? AND hash IN ({marks})"
            f" UNION SELECT transaction_hash AS hash FROM transfers"
            f" WHERE chain_id = ? AND transaction_hash IN ({marks})",
            (chain_id, *chunk, chain_id, *chunk),
        )
        found.update(str(row["hash"]) for row in rows)
    return found


def insert(
    tx: Transaction,
    *,
    chain_id: int,
    tx_hash: str,
    log_index: int,
    org_id: str,
    address: str,
    token: str,
    raw: int,
    sender: str,
    block_number: int,
    now: str,
) -> bool:
    """Record a deposit for an organization; False when it was recorded before."""
    values = (
        chain_id,
        tx_hash,
        log_index,
        org_id,
        address,
        token,
        str(raw),
        sender,
        block_number,
        now,
    )
    return bool(
        tx.execute(
            "INSERT INTO deposits (chain_id, hash, log_index, org_id, address, token, raw,"
            " sender, block_number, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            values,
        )
    )
