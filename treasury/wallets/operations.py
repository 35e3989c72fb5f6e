"""Wallets: custody-managed ones (`create`) and watch-only ones (`track`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .._infra import audit
from .._infra.group import Group
from .._infra.models import Address, Deleted, ListOf, ListQuery
from .._infra.validation import parse_input, parse_value
from .._records import policy
from .._records import wallets as records
from .._records.nonces import next_free_nonce
from ..backends.storage.base import Transaction
from ..errors import NotFound, ValidationError
from . import store
from .models import (
    CreateWallet,
    TrackedWallet,
    TrackedWalletResponse,
    TrackWallet,
    UpdateWallet,
    Wallet,
)

Chunk = list[Wallet]  # (`list` is a method's name in the class)


class Wallets(Group):
    name = "wallets"

    def create(
        self,
        body: CreateWallet | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Wallet:
        """Create a custody-managed wallet; `label` defaults to `Wallet N`."""
        request = parse_input(CreateWallet, body, fields)
        return self._in_one_transaction(
            "create", idempotency_key, request, lambda tx: self._create(tx, request), Wallet
        )

    def _create(self, tx: Transaction, request: CreateWallet) -> Wallet:
        org_id, runtime = self._scope.org_id, self._scope.runtime
        tx.lock(f"wallets:{org_id}")
        label = request.label if request.label is not None else store.default_label(tx, org_id)
        key = runtime.custody.create_key()
        row = store.insert(
            tx,
            org_id,
            address=key.address,
            label=label,
            kind="managed",
            custody_ref=key.ref,
            now=runtime.now_text(),
        )
        return Wallet.model_validate(row)

    def track(
        self,
        body: TrackWallet | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> TrackedWalletResponse:
        """Add a watch-only wallet (not the zero address; 409 if already present)."""
        request = parse_input(TrackWallet, body, fields)
        scope = self._scope

        def track(tx: Transaction) -> TrackedWalletResponse:
            policy.guard_address_book(tx, scope.org_id, scope.admin)  # as it commits
            row = store.insert(
                tx,
                self._scope.org_id,
                address=request.address,
                label=request.label,
                kind="tracked",
                custody_ref=None,
                now=self._scope.runtime.now_text(),
            )
            return TrackedWalletResponse(wallet=TrackedWallet.model_validate(row))

        return self._in_one_transaction(
            "track", idempotency_key, request, track, TrackedWalletResponse
        )

    def list(
        self, query: ListQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> ListOf[Wallet]:
        """Every current wallet, managed and tracked, sorted by `sort` and `order`."""
        return ListOf[Wallet](
            data=[item for chunk in self.chunks(query, **params) for item in chunk]
        )

    def chunks(
        self, query: ListQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> Iterator[Chunk]:
        """`list`'s items a few hundred at a time, read from the store as they are
        consumed (how HTTP streams them). It holds a read snapshot of this thread until
        exhausted or closed: consume it before using the treasury again in the thread."""
        query = parse_input(ListQuery, query, params, "query")
        with self._scope.runtime.storage.read() as tx:
            for rows in store.current(tx, self._scope.org_id, query):
                yield [Wallet.model_validate(row) for row in rows]

    def get(self, address: str) -> Wallet:
        """One current wallet of this organization by its address (any case)."""
        with self._scope.runtime.storage.read() as tx:
            row = records.by_address(tx, self._scope.org_id, _address(address))
        if row is None:
            raise NotFound("Wallet not found")
        return Wallet.model_validate(row)

    def update(
        self, address: str, body: UpdateWallet | Mapping[str, Any] | None = None, **fields: Any
    ) -> Wallet:
        """Rename a wallet (`label`, 1 to 100 characters); `updated_at` moves."""
        address, request = _address(address), parse_input(UpdateWallet, body, fields)
        runtime = self._scope.runtime
        with runtime.storage.transaction() as tx:
            row = store.relabel(tx, self._scope.org_id, address, request.label, runtime.now_text())
            if row is not None:
                audit.record(tx)
        if row is None:
            raise NotFound("Wallet not found")
        return Wallet.model_validate(row)

    def delete(self, address: str) -> Deleted:
        """Remove the wallet from the organization; custody keeps its key material."""
        address, runtime = _address(address), self._scope.runtime
        with runtime.storage.transaction() as tx:
            removed = store.remove(tx, self._scope.org_id, address, runtime.now_text())
            if removed:
                audit.record(tx)
        if not removed:
            raise NotFound("Wallet not found")
        return Deleted()

    def send_transaction(
        self, chain_id: int, address: str, *, to: str, data: bytes = b"", value: int = 0
    ) -> str:
        """Sign with custody and broadcast from a managed wallet; return the hash."""
        runtime = self._scope.runtime
        with runtime.storage.read() as tx:
            row = records.by_address(tx, self._scope.org_id, _address(address))
        if row is None:
            raise NotFound("Wallet not found")
        if row["custody_ref"] is None:
            raise ValidationError.field("path", "address", "tracked wallets cannot sign")
        with runtime.signer.holding(chain_id, row["address"]):
            with runtime.storage.read() as tx:  # nonces that a claimed transfer holds
                floor = next_free_nonce(tx, chain_id, row["address"])
            return runtime.signer.send(
                runtime.chains.get(chain_id),
                custody_ref=row["custody_ref"],
                sender=row["address"],
                to=_address(to),
                data=data,
                value=value,
                floor=floor,
            )


def _address(value: str) -> str:
    return str(parse_value(Address, value, "path", "address"))
