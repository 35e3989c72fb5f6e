"""What several domains write and read of the transactions table: tracked transactions,
pending until the indexer resolves them.

The transactions domain records them, lists them and resolves them
(`treasury.transactions.store`); a transfer records its own legs, a gas top-up and an
on-ramp's payout into a wallet of the organization (`RecordTransaction`, the request
both write), and follows a leg's signed versions (`rehash`, `forget_pending`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, field_validator

from .._infra.models import HASH_PATTERN, Address, Body, RowId
from ..errors import Conflict

if TYPE_CHECKING:
    from ..backends.storage.base import Row, Transaction

TxHash = Annotated[str, StringConstraints(pattern=HASH_PATTERN), Field()]


def _uint256(value: str) -> str:
    if int(value) >= 2**256:
        raise ValueError("must fit in uint256")
    return value


RawAmount = Annotated[
    str, StringConstraints(pattern=r"^(0|[1-9][0-9]{0,77})$"), AfterValidator(_uint256)
]
TransactionType = Literal["deposit", "withdrawal", "yield", "approval", "other"]
#: What a tracked transaction may be: a type a caller records, or ``gas``, a gas
#: station's top-up, which only the service records.
TrackedType = Literal["deposit", "withdrawal", "yield", "approval", "other", "gas"]
TransactionStatus = Literal["pending", "confirmed", "failed"]


class RecordTransaction(Body):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    hash: TxHash
    type: TransactionType
    from_: Address = Field(alias="from")
    contract: Address
    token: Address
    amount: RawAmount
    wallet_id: RowId = Field(alias="walletId")

    @field_validator("hash")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()


COLUMNS = (
    "org_id, chain_id, hash, type, sender, contract, token, amount, wallet_number, status,"
    " receipt, created_at, updated_at"
)


def insert(
    tx: Transaction,
    org_id: str,
    chain_id: int,
    request: RecordTransaction,
    wallet: Row,
    now: str,
    *,
    kind: TrackedType | None = None,
) -> None:
    """A pending transaction of `wallet` (a row with `row_id`, `id` and `address`), of
    the request's type unless `kind` says otherwise (a gas top-up)."""
    # imported here: this module's models (read by the typed client) need no storage
    from ..backends.storage.base import DuplicateKey

    try:
        tx.execute(
            "INSERT INTO transactions (org_id, chain_id, hash, type, sender, contract, token,"
            " amount, wallet_id, wallet_number, wallet_address, status, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
            (
                org_id,
                chain_id,
                request.hash,
                kind or request.type,
                request.from_,
                request.contract,
                request.token,
                request.amount,
                wallet["row_id"],
                wallet["id"],
                wallet["address"],
                now,
                now,
            ),
        )
    except DuplicateKey:
        raise Conflict("This transaction is already recorded") from None


def by_hash(tx: Transaction, org_id: str, chain_id: int, tx_hash: str) -> Row | None:
    return tx.one(
        f"SELECT {COLUMNS} FROM transactions WHERE org_id = ? AND chain_id = ? AND hash = ?",
        (org_id, chain_id, tx_hash),
    )


def rehash(tx: Transaction, chain_id: int, before: str, after: str, now: str) -> None:
    """A pending leg's tracked rows follow its signed version: `before` replaced at
    higher fees by `after`, or `after` the version that was mined."""
    tx.execute(
        "UPDATE transactions SET hash = ?, updated_at = ? WHERE chain_id = ? AND hash = ?"
        " AND status = 'pending'",
        (after, now, chain_id, before),
    )


def forget_pending(tx: Transaction, chain_id: int, tx_hash: str) -> None:
    """Forget the service's own pending transaction that a node definitely refused."""
    tx.execute(
        "DELETE FROM transactions WHERE chain_id = ? AND hash = ? AND status = 'pending'",
        (chain_id, tx_hash),
    )
