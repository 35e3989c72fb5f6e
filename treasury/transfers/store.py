"""The transfers table, its signed legs, and the one guarded status update.

A transfer's `stage` says how far its upstream work went: ``claimed`` (written ahead:
the provider or the chain may not have heard of it yet; a job finishes it once its
lease passes) or ``recorded`` (what it started upstream is recorded here). Its `status`
is what the API shows, and it only moves forward (`move`).

Every status a transfer reaches is announced through the outbox in the storage
transaction that reaches it (`announce`), once: ``transfer.created`` when its claim is
recorded (the guarded step from ``claimed`` to ``recorded``: upstream accepted it, so the
transfer stays), then ``transfer.submitted``, ``transfer.completed`` or ``transfer.failed``
with the one guarded update that reaches each. A claim definitely refused upstream was
never announced and is forgotten (`remove`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

from .._infra.crypto import SecretBox
from .._infra.sql import keyset_page, take_expired_leases
from .._records.bank_accounts import BankAccountSummary
from .._records.events import emit
from .._records.nonces import FAILED, NoncesTaken
from .._records.postings import REFUNDING
from .._records.transfers import (
    AWAITING,
    CLAIMED,
    NEXT,
    OPEN,
    QUEUED,
    RECORDED,
    ApprovalStatus,
    Status,
    sql_list,
)
from ..backends.storage.base import Row, Transaction
from ..evm.signing import Signed
from .models import (
    FIAT,
    ONCHAIN,
    Currency,
    DepositInstructions,
    Pairing,
    Transfer,
    TransferSide,
)

COLUMNS = (
    "id, org_id, pairing, status, stage, amount, developer_fee, client_reference_id,"
    " source, destination, chain_id, wallet_address, bank_account_id, transaction_hash,"
    " provider_transfer_id, provider_state, deposit_instructions, deposit_address, failure,"
    " lease_until, created_at, updated_at, ambiguous, reserve_token, reserve_raw, reserve_wei,"
    " approval_status, created_by_user, waiting_reason, queued"
)
#: The purpose under which deposit instructions (account and routing numbers) are sealed.
INSTRUCTIONS = "deposit-instructions"
_UPDATABLE = frozenset(
    {
        "stage",
        "destination",
        "transaction_hash",
        "provider_transfer_id",
        "provider_state",
        "deposit_instructions",
        "deposit_address",
        "failure",
        "lease_until",
        "ambiguous",
        "waiting_reason",
    }
)

#: The provider state of a transfer that waits for its funds (an off-ramp's USDC).
AWAITING_FUNDS = "awaiting_funds"
#: The on-chain pairings (`models.ONCHAIN`), as SQL.
ON_CHAIN = sql_list(sorted(ONCHAIN))


def shown(row: Row, box: SecretBox) -> Transfer:
    """The API's Transfer from a row of `COLUMNS` (`box` opens the deposit instructions)."""
    instructions = row["deposit_instructions"]
    return Transfer.model_validate(
        {
            "id": row["id"],
            "from": Side.loads(row["source"]).shown(),
            "to": Side.loads(row["destination"]).shown(),
            "status": row["status"],
            "transaction_hash": row["transaction_hash"],
            "client_reference_id": row["client_reference_id"],
            "deposit_instructions": (
                None
                if instructions is None
                else DepositInstructions.model_validate_json(box.unseal(INSTRUCTIONS, instructions))
            ),
            "failure_reason": row["failure"] if row["status"] == "failed" else None,
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "approval_status": row["approval_status"],
            "waiting_reason": waiting_reason(row),
        }
    )


def waiting_reason(row: Row) -> str | None:
    """Why a transfer waits: null once final or while it moves; what a job found (a leg
    short of gas, above the fee cap, behind an earlier leg, awaiting confirmations);
    else its approval, or the fiat provider."""
    if not NEXT[row["status"]]:
        return None
    if row["waiting_reason"] is not None:
        return str(row["waiting_reason"])
    if row["approval_status"] == "awaiting":
        return "approval"
    if row["pairing"] in FIAT and row["stage"] == RECORDED:
        return "provider"
    return None


@dataclass(frozen=True)
class BankShown:
    """The display fields of a bank account a stored side keeps (the API's
    `BankAccountSummary`): its uuid, bank, owner and the last four digits."""

    id: str
    bank_name: str
    account_owner_name: str
    account_number_last4: str


@dataclass(frozen=True)
class Side:
    """A transfer side as the transfers table stores it (its `source` and `destination`
    columns), apart from the API's `TransferSide`: exactly one of `address` (with
    `chain_id`) and `bank_account`, a currency and an amount in token units.

    Stored as JSON with the keys ``address``, ``bankAccount`` (``id``, ``bankName``,
    ``accountOwnerName``, ``accountNumberLast4``), ``chainId``, ``currency`` and
    ``amount``: the text every row holds since the table was made, which the books'
    postings read as they are."""

    currency: str
    amount: str
    address: str | None = None
    chain_id: int | None = None
    bank_account: BankShown | None = None

    def dumps(self) -> str:
        """The column's text."""
        bank = self.bank_account
        value = {
            "address": self.address,
            "bankAccount": None
            if bank is None
            else {
                "id": bank.id,
                "bankName": bank.bank_name,
                "accountOwnerName": bank.account_owner_name,
                "accountNumberLast4": bank.account_number_last4,
            },
            "chainId": self.chain_id,
            "currency": self.currency,
            "amount": self.amount,
        }
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def loads(cls, text: str) -> Side:
        """A side from the column's text."""
        value = json.loads(text)
        bank = value.get("bankAccount")
        return cls(
            currency=value["currency"],
            amount=value["amount"],
            address=value.get("address"),
            chain_id=value.get("chainId"),
            bank_account=None
            if bank is None
            else BankShown(
                id=bank["id"],
                bank_name=bank["bankName"],
                account_owner_name=bank["accountOwnerName"],
                account_number_last4=bank["accountNumberLast4"],
            ),
        )

    def shown(self) -> TransferSide:
        """The side as the API shows it."""
        bank = self.bank_account
        return TransferSide(
            address=self.address,
            bank_account=None
            if bank is None
            else BankAccountSummary(
                id=bank.id,
                bank_name=bank.bank_name,
                account_owner_name=bank.account_owner_name,
                account_number_last4=bank.account_number_last4,
            ),
            chain_id=self.chain_id,
            currency=cast(Currency, self.currency),
            amount=self.amount,
        )


def insert(
    tx: Transaction, values: dict[str, Any], *, awaiting: bool = False, queued: str | None = None
) -> None:
    """A new transfer: its claim (``pending``, stage ``claimed``), not announced yet; or,
    `awaiting` its approval, accepted (stage ``awaiting``: the caller announces it now,
    nothing upstream will refuse it before a decision); or `queued` (its place in its
    wallet's queue) while its wallet has no room among its legs in flight, accepted
    likewise (stage ``queued``, waiting ``"nonce"``: a job signs it when room frees up)."""
    first: Status = "pending"
    approval: ApprovalStatus = "awaiting" if awaiting else "not_required"
    stage = AWAITING if awaiting else QUEUED if queued is not None else CLAIMED
    values = {**values, "status": first, "stage": stage, "approval_status": approval}
    if queued is not None and not awaiting:
        values |= {"queued": queued, "waiting_reason": "nonce"}
    columns = list(values)
    tx.execute(
        f"INSERT INTO transfers ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
        list(values.values()),
    )


def announce(tx: Transaction, transfer_id: str, event: str, now: str, box: SecretBox) -> None:
    """Emit ``transfer.<event>`` with the Transfer as the API shows it now, matched by
    webhooks' wallet filters on either side's address."""
    row = get(tx, transfer_id)
    assert row is not None
    sides = [Side.loads(row[name]) for name in ("source", "destination")]
    addresses = {str(side.address) for side in sides if side.address is not None}
    emit(
        tx,
        org_id=row["org_id"],
        event_type=f"transfer.{event}",
        wallet_address=sorted(addresses),
        data=shown(row, box).to_json(),
        now=now,
        box=box if row["deposit_instructions"] is not None else None,  # sealed at rest
    )


def get(tx: Transaction, transfer_id: str, org_id: str | None = None) -> Row | None:
    """A transfer by id, within an organization when `org_id` is given. A claim whose
    request is still in flight is shown too (``pending``)."""
    if org_id is None:
        return tx.one(f"SELECT {COLUMNS} FROM transfers WHERE id = ?", (transfer_id,))
    return tx.one(
        f"SELECT {COLUMNS} FROM transfers WHERE id = ? AND org_id = ?", (transfer_id, org_id)
    )


def page(
    tx: Transaction, org_id: str, after: tuple[Any, Any] | None, limit: int
) -> tuple[list[Row], tuple[Any, Any] | None]:
    """Newest first by (created_at, id), a seek on the feed index whatever the depth;
    claims in flight included."""
    select = f"SELECT {COLUMNS} FROM transfers WHERE org_id = ?"
    return keyset_page(tx, select, (org_id,), after, limit)


def update(tx: Transaction, transfer_id: str, now: str, *, box: SecretBox, **fields: Any) -> None:
    """Set bookkeeping fields (never the status: that is `move`); recording the claim
    (``stage="recorded"``) announces ``transfer.created`` with these fields set."""
    _check(fields)
    recorded = _recorded(tx, transfer_id, fields)
    assignments = ", ".join(f"{name} = ?" for name in fields)
    tx.execute(
        f"UPDATE transfers SET {assignments}, updated_at = ? WHERE id = ?",
        (*fields.values(), now, transfer_id),
    )
    if recorded:
        announce(tx, transfer_id, "created", now, box)


def _recorded(tx: Transaction, transfer_id: str, fields: dict[str, Any]) -> bool:
    """Whether `fields` record the claim now: the guarded step from ``claimed`` to
    ``recorded``, taken once whatever the number of finishers; True when it announces
    ``transfer.created`` (a transfer that awaited approval, or was queued, was announced
    on acceptance)."""
    stepped = fields.get("stage") == RECORDED and bool(
        tx.execute(
            "UPDATE transfers SET stage = ? WHERE id = ? AND stage = ?",
            (RECORDED, transfer_id, CLAIMED),
        )
    )
    return stepped and not _accepted_first(tx, transfer_id)


def _approval(tx: Transaction, transfer_id: str) -> ApprovalStatus | None:
    row = tx.one("SELECT approval_status FROM transfers WHERE id = ?", (transfer_id,))
    return None if row is None else row["approval_status"]


def _accepted_first(tx: Transaction, transfer_id: str) -> bool:
    """Whether a transfer was accepted (and announced) before its claim: it awaited an
    approval, or it was queued for room among its wallet's legs in flight."""
    row = tx.one("SELECT approval_status, queued FROM transfers WHERE id = ?", (transfer_id,))
    return row is not None and (
        row["approval_status"] != "not_required" or row["queued"] is not None
    )


def move(
    tx: Transaction, transfer_id: str, status: Status, now: str, *, box: SecretBox, **fields: Any
) -> bool:
    """The one guarded status update: to `status` only from a status that may move
    there (`NEXT`), with `fields` set alongside, announced ``transfer.<status>`` in the
    same transaction; False (nothing changed, nothing announced) otherwise. With
    ``stage="recorded"`` it records the claim first (``transfer.created``, as pending)."""
    _check(fields)
    if _recorded(tx, transfer_id, fields):
        announce(tx, transfer_id, "created", now, box)
    sources = [before for before, after in NEXT.items() if status in after]
    if not sources:  # nothing moves there (pending is only ever a first status)
        return False
    assignments = "".join(f", {name} = ?" for name in fields)
    marks = ", ".join("?" * len(sources))
    moved = bool(
        tx.execute(
            f"UPDATE transfers SET status = ?, updated_at = ?{assignments}"
            f" WHERE id = ? AND status IN ({marks})",
            (status, now, *fields.values(), transfer_id, *sources),
        )
    )
    if moved:
        announce(tx, transfer_id, status, now, box)
    return moved


def fail_claim(tx: Transaction, transfer_id: str, now: str, box: SecretBox, reason: str) -> bool:
    """Record a claimed transfer as failed, with its `reason` (`failureReason`)."""
    return move(tx, transfer_id, "failed", now, box=box, stage=RECORDED, failure=reason)


def remove(tx: Transaction, transfer_id: str, now: str, box: SecretBox) -> None:
    """Forget a claimed transfer that never reached anyone (a definite refusal): it was
    never announced, and is 404 from now on. One that was approved, or queued, was
    announced on acceptance: it fails instead, its unsent legs dropped."""
    if _accepted_first(tx, transfer_id):
        forget_unsent(tx, transfer_id)
        fail_claim(tx, transfer_id, now, box, REFUSED)
        return
    tx.execute("DELETE FROM transfer_legs WHERE transfer_id = ?", (transfer_id,))
    tx.execute("DELETE FROM transfers WHERE id = ? AND stage = ?", (transfer_id, CLAIMED))


#: The failure of an approved transfer that upstream definitely refused.
REFUSED = "refused upstream after approval"


def keep(tx: Transaction, transfer_id: str, ambiguous: bool) -> bool:
    """Ambiguity is sticky: after a failure whose outcome is unknown, remember it; True
    (keep the claim in flight) when this failure or an earlier one was ambiguous."""
    if ambiguous:
        tx.execute("UPDATE transfers SET ambiguous = 1 WHERE id = ?", (transfer_id,))
        return True
    row = tx.one("SELECT ambiguous FROM transfers WHERE id = ?", (transfer_id,))
    return row is not None and bool(row["ambiguous"])


def _check(fields: dict[str, Any]) -> None:
    unknown = set(fields) - _UPDATABLE
    if unknown:
        raise ValueError(f"not transfer fields: {', '.join(sorted(unknown))}")


# -- open work for the jobs ----------------------------------------------------------------


def accepted_since(tx: Transaction, org_id: str, since: str) -> Decimal:
    """The dollars of the organization's transfers accepted at or after `since` and not
    failed (the daily limit's count; sweeps, the service's own, are not counted)."""
    failed: Status = "failed"
    rows = tx.query(
        "SELECT amount FROM transfers WHERE org_id = ? AND created_at >= ? AND status <> ?"
        " AND pairing <> ?",
        (org_id, since, failed, _SWEEP),
    )
    return sum((Decimal(row["amount"]) for row in rows), Decimal(0))


def oldest_first(tx: Transaction, org_id: str, start: str, end: str) -> Iterator[list[Row]]:
    """The feed between `start` (included) and `end` (excluded), oldest first, read from
    the store in chunks as they are consumed."""
    return tx.stream(
        f"SELECT {COLUMNS} FROM transfers WHERE org_id = ? AND created_at >= ?"
        " AND created_at < ? ORDER BY created_at, id",
        (org_id, start, end),
        size=500,
    )


# -- approvals -----------------------------------------------------------------------------


def decide(tx: Transaction, transfer_id: str, decision: ApprovalStatus) -> bool:
    """The one guarded step of an approval: from ``awaiting`` (a pending transfer) to
    `decision`; False when the transfer awaits none (decided already, or never asked)."""
    awaiting: ApprovalStatus = "awaiting"
    pending: Status = "pending"
    return bool(
        tx.execute(
            "UPDATE transfers SET approval_status = ? WHERE id = ? AND approval_status = ?"
            " AND status = ?",
            (decision, transfer_id, awaiting, pending),
        )
    )


def awaiting_before(tx: Transaction, created_before: str, limit: int) -> list[Row]:
    """Transfers still awaiting a decision that were accepted before `created_before`."""
    awaiting: ApprovalStatus = "awaiting"
    return tx.query(
        "SELECT id, org_id FROM transfers WHERE approval_status = ? AND created_at < ?"
        " ORDER BY created_at LIMIT ?",
        (awaiting, created_before, limit),
    )


def approved_unstarted(tx: Transaction, limit: int) -> list[Row]:
    """Approved transfers whose execution has not started (stage still ``awaiting``)."""
    approved: ApprovalStatus = "approved"
    pending: Status = "pending"
    return tx.query(
        f"SELECT {COLUMNS} FROM transfers WHERE approval_status = ? AND stage = ?"
        " AND status = ? ORDER BY created_at LIMIT ?",
        (approved, AWAITING, pending, limit),
    )


def start(tx: Transaction, transfer_id: str, lease_until: str, **reserve: str) -> bool:
    """Make an approved transfer a claim (stage ``claimed``, leased to its starter, with
    its `reserve` columns as signed); False when another worker started it first."""
    approved: ApprovalStatus = "approved"
    assignments = "".join(f", {name} = ?" for name in reserve)
    return bool(
        tx.execute(
            f"UPDATE transfers SET stage = ?, lease_until = ?{assignments}"
            " WHERE id = ? AND stage = ? AND approval_status = ?",
            (CLAIMED, lease_until, *reserve.values(), transfer_id, AWAITING, approved),
        )
    )


# -- the queue of a wallet's transfers waiting for room among its legs in flight -----------


def queued_wallets(tx: Transaction, limit: int) -> list[Row]:
    """(chain_id, wallet_address) of the wallets with queued transfers."""
    return tx.query(
        "SELECT DISTINCT chain_id, wallet_address FROM transfers WHERE stage = ?"
        " ORDER BY chain_id, wallet_address LIMIT ?",
        (QUEUED, limit),
    )


def queued(tx: Transaction, chain_id: int, wallet: str, limit: int) -> list[Row]:
    """A wallet's queued transfers, first in the queue first."""
    return tx.query(
        f"SELECT {COLUMNS} FROM transfers WHERE stage = ? AND chain_id = ?"
        " AND wallet_address = ? ORDER BY queued LIMIT ?",
        (QUEUED, chain_id, wallet, limit),
    )


def has_queue(tx: Transaction, chain_id: int, wallet: str) -> bool:
    """Whether a wallet has queued transfers (a new one then queues behind them)."""
    row = tx.one(
        "SELECT 1 AS found FROM transfers WHERE stage = ? AND chain_id = ? AND wallet_address = ?"
        " LIMIT 1",
        (QUEUED, chain_id, wallet),
    )
    return row is not None


def start_queued(tx: Transaction, transfer_id: str, lease_until: str, reserve_wei: str) -> bool:
    """Make a queued transfer a claim (stage ``claimed``, leased to its starter, its gas
    held at the fee it was signed at, moving again); False when another worker did first."""
    pending: Status = "pending"
    return bool(
        tx.execute(
            "UPDATE transfers SET stage = ?, lease_until = ?, reserve_wei = ?,"
            " waiting_reason = NULL WHERE id = ? AND stage = ? AND status = ?",
            (CLAIMED, lease_until, reserve_wei, transfer_id, QUEUED, pending),
        )
    )


def release_claims(tx: Transaction, transfer_ids: Sequence[str], now: str) -> None:
    """End the lease of claims whose request is done with them (it left them in flight
    after an ambiguous failure): the job finishes them at its next pass."""
    for transfer_id in transfer_ids:
        tx.execute(
            "UPDATE transfers SET lease_until = ? WHERE id = ? AND stage = ?",
            (now, transfer_id, CLAIMED),
        )


def take_expired_claims(tx: Transaction, now: str, until: str, limit: int) -> list[Row]:
    """Take over claims whose lease has passed (their request died): leased to `until`."""
    return take_expired_leases(tx, "transfers", "id", f"stage = '{CLAIMED}'", now, until, limit)


def open_fiat(tx: Transaction, limit: int) -> list[Row]:
    """Recorded fiat transfers the provider has not finished: those that have not ended,
    and those that failed while the provider still owes their money back (a refund
    under way: `postings.REFUNDING`), least recently updated first."""
    failed: Status = "failed"
    return tx.query(
        f"SELECT {COLUMNS} FROM transfers WHERE (status IN {OPEN}"
        f" OR (status = ? AND provider_state IN {sql_list(sorted(REFUNDING))}))"
        " AND stage = ? AND provider_transfer_id IS NOT NULL"
        " ORDER BY updated_at LIMIT ?",
        (failed, RECORDED, limit),
    )


def open_onchain(tx: Transaction, limit: int) -> list[Row]:
    """Submitted on-chain transfers, awaiting their swap's receipt."""
    submitted: Status = "submitted"
    return tx.query(
        f"SELECT {COLUMNS} FROM transfers WHERE status = ?"
        f" AND pairing IN {ON_CHAIN} ORDER BY updated_at LIMIT ?",
        (submitted, limit),
    )


def offramps_sending(tx: Transaction, limit: int) -> list[Row]:
    """Off-ramps whose USDC send went out while the provider still awaits it."""
    pending: Status = "pending"
    return tx.query(
        f"SELECT {COLUMNS} FROM transfers WHERE status = ? AND pairing = ?"
        " AND stage = ? AND transaction_hash IS NOT NULL"
        " AND provider_state = ? ORDER BY updated_at LIMIT ?",
        (pending, _OFFRAMP, RECORDED, AWAITING_FUNDS, limit),
    )


def failed_offramps_awaiting_funds(tx: Transaction, limit: int) -> list[Row]:
    """Failed off-ramps whose provider transfer still awaits USDC that will never come."""
    failed: Status = "failed"
    return tx.query(
        f"SELECT {COLUMNS} FROM transfers WHERE status = ? AND pairing = ?"
        " AND provider_transfer_id IS NOT NULL AND provider_state = ?"
        " ORDER BY updated_at LIMIT ?",
        (failed, _OFFRAMP, AWAITING_FUNDS, limit),
    )


_OFFRAMP: Pairing = "offramp"
_SWEEP: Pairing = "sweep"


# -- signed legs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Leg:
    """One signed transaction of a transfer, stored before it is broadcast."""

    kind: str  # its tracked-transaction type: approval, deposit, withdrawal, other
    contract: str  # the address it calls
    token: str  # the ERC-20 it moves or approves
    amount: int  # raw units
    signed: Signed


def add_legs(
    tx: Transaction, transfer_id: str, chain_id: int, sender: str, legs: Sequence[Leg]
) -> None:
    """Store the legs ahead of their broadcast; a leg already stored at a position is
    kept (two finishers of one transfer store it once). Under a lock per (chain, sender)
    across processes, legs of another transfer that has not failed must not hold any of these
    nonces (`NoncesTaken`; a completed transfer's too, whose block a reorg may still
    remove): two API processes that read the same pending count would
    otherwise both sign nonce N, and a node could take the second as a replacement of the
    first, leaving that transfer submitted forever."""
    if not legs:
        return
    tx.lock(f"nonces:{chain_id}:{sender}")
    nonces = [leg.signed.nonce for leg in legs]
    clash = tx.one(
        "SELECT 1 AS taken FROM transfer_legs l JOIN transfers t ON t.id = l.transfer_id"
        " WHERE l.chain_id = ? AND l.sender = ? AND l.nonce BETWEEN ? AND ?"
        f" AND l.transfer_id <> ? AND t.status <> {FAILED} LIMIT 1",
        (chain_id, sender, min(nonces), max(nonces), transfer_id),
    )
    if clash is not None:
        raise NoncesTaken()
    for position, leg in enumerate(legs):
        signed = leg.signed
        tx.execute(
            "INSERT INTO transfer_legs (transfer_id, position, kind, contract, token, amount,"
            " chain_id, sender, nonce, hash, raw, sent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
            " ON CONFLICT (transfer_id, position) DO NOTHING",
            (
                transfer_id,
                position,
                leg.kind,
                leg.contract,
                leg.token,
                str(leg.amount),
                chain_id,
                sender,
                signed.nonce,
                signed.hash,
                signed.raw,
            ),
        )


def legs(tx: Transaction, transfer_id: str) -> list[Leg]:
    rows = tx.query(
        "SELECT kind, contract, token, amount, nonce, hash, raw FROM transfer_legs"
        " WHERE transfer_id = ? ORDER BY position",
        (transfer_id,),
    )
    return [
        Leg(
            kind=r["kind"],
            contract=r["contract"],
            token=r["token"],
            amount=int(r["amount"]),
            signed=Signed(raw=bytes(r["raw"]), hash=r["hash"], nonce=r["nonce"]),
        )
        for r in rows
    ]


def forget_unsent(tx: Transaction, transfer_id: str) -> None:
    """Drop legs that were never broadcast (a refused transfer keeps only what went out)."""
    tx.execute("DELETE FROM transfer_legs WHERE transfer_id = ? AND sent = 0", (transfer_id,))


def mark_sent(tx: Transaction, transfer_id: str) -> None:
    tx.execute("UPDATE transfer_legs SET sent = 1 WHERE transfer_id = ?", (transfer_id,))


def versions(tx: Transaction, transfer_id: str) -> dict[int, list[str]]:
    """The hashes a transfer's legs were signed in before their current version (a stuck
    leg replaced at higher fees), by leg position: each may still be the one mined."""
    rows = tx.query(
        "SELECT position, hash FROM leg_versions WHERE transfer_id = ? ORDER BY created_at",
        (transfer_id,),
    )
    found: dict[int, list[str]] = {}
    for row in rows:
        found.setdefault(int(row["position"]), []).append(str(row["hash"]))
    return found


def version_raw(tx: Transaction, tx_hash: str) -> bytes | None:
    """The signed bytes of an earlier version of a leg, by its hash."""
    row = tx.one("SELECT raw FROM leg_versions WHERE hash = ?", (tx_hash,))
    return None if row is None else bytes(row["raw"])


def replace_leg(
    tx: Transaction, chain_id: int, sender: str, before: Signed, after: Signed, now: str
) -> str | None:
    """Store `after` as the current version of the leg signed as `before` (same nonce,
    higher fees), written ahead of its broadcast; `before` stays watched. The transfer's
    id, or None when the leg is no longer current (replaced meanwhile)."""
    row = tx.one(
        "SELECT transfer_id, position FROM transfer_legs WHERE chain_id = ? AND sender = ?"
        " AND hash = ?",
        (chain_id, sender, before.hash),
    )
    if row is None:
        return None
    tx.execute(
        "INSERT INTO leg_versions (hash, transfer_id, position, chain_id, raw, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING",
        (before.hash, row["transfer_id"], row["position"], chain_id, before.raw, now),
    )
    tx.execute(
        "UPDATE transfer_legs SET hash = ?, raw = ?, broadcast_block = NULL"
        " WHERE transfer_id = ? AND position = ?",
        (after.hash, after.raw, row["transfer_id"], row["position"]),
    )
    return str(row["transfer_id"])


def broadcast_at(tx: Transaction, chain_id: int, sender: str, tx_hash: str, block: int) -> None:
    """Note the head at which a leg's current version was first seen waiting."""
    tx.execute(
        "UPDATE transfer_legs SET broadcast_block = ? WHERE chain_id = ? AND sender = ?"
        " AND hash = ? AND broadcast_block IS NULL",
        (block, chain_id, sender, tx_hash),
    )


def waits(tx: Transaction, transfer_ids: Sequence[str], reason: str | None) -> None:
    """Say why open transfers wait (`waitingReason`; None: they are moving). Not a status
    change: nothing is announced and `updatedAt` stays."""
    changed = (
        "waiting_reason IS NOT NULL"
        if reason is None
        else "(waiting_reason IS NULL OR waiting_reason <> ?)"
    )
    for transfer_id in transfer_ids:
        tx.execute(
            f"UPDATE transfers SET waiting_reason = ? WHERE id = ? AND status IN {OPEN}"
            f" AND {changed}",
            (reason, transfer_id) if reason is None else (reason, transfer_id, reason),
        )


def sent_after_waiting(tx: Transaction, transfer_id: str, now: str, box: SecretBox) -> bool:
    """A recorded transfer whose legs waited for gas, now broadcast by the job: its legs
    marked sent, and it moves to ``submitted`` with its moving leg's hash."""
    legs_of = legs(tx, transfer_id)
    row = get(tx, transfer_id)
    if not legs_of or row is None or row["stage"] != RECORDED or row["pairing"] not in ONCHAIN:
        return False
    mark_sent(tx, transfer_id)
    return move(
        tx,
        transfer_id,
        "submitted",
        now,
        box=box,
        transaction_hash=legs_of[-1].signed.hash,
        waiting_reason=None,
    )


def open_top_up(tx: Transaction, chain_id: int, wallet: str) -> str | None:
    """The hash of the wallet's gas top-up not yet seen mined, if any."""
    row = tx.one(
        "SELECT hash FROM gas_topups WHERE chain_id = ? AND wallet = ? AND settled = 0",
        (chain_id, wallet),
    )
    return None if row is None else str(row["hash"])


def top_up_sent(
    tx: Transaction, chain_id: int, wallet: str, station: str, tx_hash: str, amount: int, now: str
) -> None:
    tx.execute(
        "INSERT INTO gas_topups (hash, chain_id, wallet, station, amount, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (tx_hash, chain_id, wallet, station, str(amount), now),
    )


def top_up_settled(tx: Transaction, tx_hash: str) -> None:
    tx.execute("UPDATE gas_topups SET settled = 1 WHERE hash = ?", (tx_hash,))


def top_up_refused(tx: Transaction, tx_hash: str) -> None:
    tx.execute("DELETE FROM gas_topups WHERE hash = ? AND settled = 0", (tx_hash,))
