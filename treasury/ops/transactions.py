"""Tracked on-chain transactions: recorded as pending, resolved by the indexer."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._runtime import Scope
from .._validation import parse, parse_value
from ..backends.storage.base import DuplicateKey, Row
from ..errors import Conflict, NotFound
from ..models.chain import Recorded, RecordTransaction, Transaction, TxHash

COLUMNS = (
    "org_id, chain_id, hash, type, sender, contract, token, amount, wallet_id, status,"
    " receipt, created_at, updated_at"
)


def transaction_from_row(row: Row) -> Transaction:
    receipt = row["receipt"]
    return Transaction.model_validate(
        row
        | {
            "organization_id": row["org_id"],
            "from": row["sender"],
            "receipt": None if receipt is None else json.loads(receipt),
        }
    )


class Transactions:
    def __init__(self, scope: Scope):
        self._scope = scope

    def record(
        self,
        chain_id: int,
        body: RecordTransaction | Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Recorded:
        """Queue a transaction for indexing; `walletId` must be this organization's."""
        runtime, org_id = self._scope.runtime, self._scope.org_id
        runtime.chains.require(chain_id)
        request = parse(RecordTransaction, body if body is not None else fields)
        now = runtime.now_text()
        with runtime.storage.transaction() as tx:
            wallet = tx.one(
                "SELECT address FROM wallets WHERE org_id = ? AND id = ? AND deleted_at IS NULL",
                (org_id, request.wallet_id),
            )
            if wallet is None:
                raise NotFound("Wallet not found")
            try:
                tx.execute(
                    "INSERT INTO transactions (org_id, chain_id, hash, type, sender, contract,"
                    " token, amount, wallet_id, wallet_address, status, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
                    (
                        org_id,
                        chain_id,
                        request.hash,
                        request.type,
                        request.from_,
                        request.contract,
                        request.token,
                        request.amount,
                        request.wallet_id,
                        wallet["address"],
                        now,
                        now,
                    ),
                )
            except DuplicateKey:
                raise Conflict("This transaction is already recorded") from None
        return Recorded(hash=request.hash, chain_id=chain_id, status="pending")

    def get(self, chain_id: int, tx_hash: str) -> Transaction:
        """The transaction with its receipt (null until the indexer has seen it mined)."""
        runtime = self._scope.runtime
        runtime.chains.require(chain_id)
        tx_hash = str(parse_value(TxHash, tx_hash, "path", "hash")).lower()
        with runtime.storage.read() as tx:
            row = tx.one(
                f"SELECT {COLUMNS} FROM transactions WHERE org_id = ? AND chain_id = ? AND hash = ?",
                (self._scope.org_id, chain_id, tx_hash),
            )
        if row is None:
            raise NotFound("Transaction not found")
        return transaction_from_row(row)
