"""Tracked on-chain transactions and their receipts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pydantic import Field

from .._infra.models import Address, PageQuery, Resource, Timestamped
from .._records.transactions import TrackedType, TransactionStatus

if TYPE_CHECKING:
    from ..backends.storage.base import Row


class TransactionsQuery(PageQuery):
    """The transactions list's query: a page, and optionally one wallet's address."""

    wallet: Address | None = None


class Recorded(Resource):
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
    type: TrackedType
    from_: str = Field(alias="from")
    contract: str
    token: str
    amount: str
    organization_id: str
    wallet_id: int
    receipt: TransactionReceipt | None = None


def shown(row: Row) -> Transaction:
    """The API's Transaction from a row of `_records.transactions.COLUMNS`."""
    receipt = row["receipt"]
    return Transaction.model_validate(
        row
        | {
            "organization_id": row["org_id"],
            "from": row["sender"],
            "wallet_id": row["wallet_number"],
            "receipt": None if receipt is None else json.loads(receipt),
        }
    )
