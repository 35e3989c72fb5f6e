"""Tracked on-chain transactions: recorded as pending, resolved by the indexer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._infra.group import Group
from .._infra.models import Page
from .._infra.pagination import Cursors, page_of
from .._infra.validation import parse_input, parse_value
from .._records import transactions as records
from .._records import wallets
from .._records.transactions import RecordTransaction, TxHash
from ..backends.storage.base import Transaction
from ..errors import NotFound
from . import store
from .models import Recorded, TransactionsQuery, shown
from .models import Transaction as TrackedTransaction


class Transactions(Group):
    name = "transactions"

    def record(
        self,
        chain_id: int,
        body: RecordTransaction | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Recorded:
        """Queue a transaction for indexing; `walletId` must be this organization's."""
        scope = self._scope
        scope.runtime.chains.require(chain_id)
        request = parse_input(RecordTransaction, body, fields)

        def insert(tx: Transaction) -> Recorded:
            wallet = wallets.by_number(tx, scope.org_id, request.wallet_id)
            if wallet is None:
                raise NotFound("Wallet not found")
            records.insert(tx, scope.org_id, chain_id, request, wallet, scope.runtime.now_text())
            return Recorded(hash=request.hash, chain_id=chain_id, status="pending")

        return self._in_one_transaction(
            "record", idempotency_key, request, insert, Recorded, path=(chain_id,)
        )

    def list(
        self,
        chain_id: int,
        query: TransactionsQuery | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> Page[TrackedTransaction]:
        """The organization's tracked transactions on `chain_id`, newest first, a page
        at a time (`cursor` from `next_cursor`); `wallet` narrows them to one address."""
        runtime, org_id = self._scope.runtime, self._scope.org_id
        runtime.chains.require(chain_id)
        query = parse_input(TransactionsQuery, query, params, "query")
        cursors = Cursors(runtime.secrets.derive("cursor:transactions"), "transactions")
        with runtime.storage.read() as tx:
            rows, following = page_of(
                cursors,
                org_id,
                query,
                lambda after, n: store.page(tx, org_id, chain_id, query.wallet, after, n),
            )
        return Page[TrackedTransaction](data=[shown(row) for row in rows], next_cursor=following)

    def get(self, chain_id: int, tx_hash: str) -> TrackedTransaction:
        """The transaction with its receipt (null until the indexer has seen it mined)."""
        runtime = self._scope.runtime
        runtime.chains.require(chain_id)
        tx_hash = str(parse_value(TxHash, tx_hash, "path", "hash")).lower()
        with runtime.storage.read() as tx:
            row = records.by_hash(tx, self._scope.org_id, chain_id, tx_hash)
        if row is None:
            raise NotFound("Transaction not found")
        return shown(row)
