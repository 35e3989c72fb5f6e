"""Tracked on-chain transactions and their receipts."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, field_validator

from .._infra.models import (
    HASH_PATTERN,
    Address,
    Body,
    PageQuery,
    Replayable,
    RowId,
    Timestamped,
)

TxHash = Annotated[str, StringConstraints(pattern=HASH_PATTERN), Field()]


def _uint256(value: str) -> str:
    if int(value) >= 2**256:
        raise ValueError("must fit in uint256")
    return value


RawAmount = Annotated[
    str, StringConstraints(pattern=r"^(0|[1-9][0-9]{0,77})$"), AfterValidator(_uint256)
]
TransactionType = Literal["deposit", "withdrawal", "yield", "approval", "other"]
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


class TransactionsQuery(PageQuery):
    """The transactions list's query: a page, and optionally one wallet's address."""

    wallet: Address | None = None


class Recorded(Replayable):
    hash: str
    chain_id: int
    status: TransactionStatus


class TransactionReceipt(Timestamped):
    chain_id: int
    hash: str
    from_: str = Field(alias="from")
    to: str
    transaction_index: int
    block_hash: str
    block_number: int
    type: int
    contract_address: str
    status: int
    root: str


class Transaction(Timestamped):
    hash: str
    chain_id: int
    status: TransactionStatus
    type: TransactionType
    from_: str = Field(alias="from")
    contract: str
    token: str
    amount: str
    organization_id: str
    wallet_id: int
    receipt: TransactionReceipt | None = None
