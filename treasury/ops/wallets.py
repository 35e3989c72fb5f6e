"""Wallets: custody-managed ones (`create`) and watch-only ones (`track`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._idempotency import run_once
from .._runtime import Scope
from .._validation import parse, parse_value
from ..backends.storage.base import DuplicateKey, Row, Transaction
from ..errors import Conflict, NotFound, ValidationError
from ..models.common import Address, Deleted, ListOf, ListQuery
from ..models.wallets import (
    CreateWallet,
    TrackedWallet,
    TrackedWalletResponse,
    TrackWallet,
    Wallet,
)
from ._sql import order_by

_DEFAULT_LABEL = re.compile(r"Wallet ([1-9][0-9]*)")
_COLUMNS = "id, address, label, type, custody_ref, created_at, updated_at"


def next_default_label(labels: list[str]) -> str:
    """`Wallet N` with N the smallest positive integer no current label uses."""
    taken = {int(m.group(1)) for label in labels if (m := _DEFAULT_LABEL.fullmatch(label))}
    n = 1
    while n in taken:
        n += 1
    return f"Wallet {n}"


class Wallets:
    def __init__(self, scope: Scope):
        self._scope = scope

    def create(
        self,
        body: CreateWallet | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Wallet:
        """Create a custody-managed wallet; `label` defaults to `Wallet N`."""
        request = parse(CreateWallet, body if body is not None else fields)
        return run_once(
            self._scope,
            idempotency_key,
            ("POST", "/v1/wallets", request),
            lambda tx: self._create(tx, request),
            Wallet,
        )

    def _create(self, tx: Transaction, request: CreateWallet) -> Wallet:
        scope = self._scope
        tx.lock(f"wallets:{scope.org_id}")
        label = request.label
        if label is None:
            rows = tx.query(
                "SELECT label FROM wallets WHERE org_id = ? AND deleted_at IS NULL"
                " AND label LIKE 'Wallet %'",
                (scope.org_id,),
            )
            label = next_default_label([row["label"] for row in rows])
        key = scope.runtime.custody.create_key()
        return _wallet(self._insert(tx, key.address, label, "managed", key.ref))

    def _insert(
        self, tx: Transaction, address: str, label: str, kind: str, custody_ref: str | None
    ) -> Row:
        now = self._scope.runtime.now_text()
        try:
            row = tx.one(
                "INSERT INTO wallets (org_id, address, label, type, custody_ref, created_at,"
                f" updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
                (self._scope.org_id, address, label, kind, custody_ref, now, now),
            )
        except DuplicateKey:
            raise Conflict("This organization already has a wallet with that address") from None
        assert row is not None
        return row

    def track(
        self, body: TrackWallet | Mapping[str, Any] | None = None, **fields: Any
    ) -> TrackedWalletResponse:
        """Add a watch-only wallet (not the zero address; 409 if already present)."""
        request = parse(TrackWallet, body if body is not None else fields)
        with self._scope.runtime.storage.transaction() as tx:
            row = self._insert(tx, request.address, request.label, "tracked", None)
        return TrackedWalletResponse(wallet=TrackedWallet.model_validate(row))

    def list(
        self, query: ListQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> ListOf[Wallet]:
        """Every current wallet, managed and tracked, sorted by `sort` and `order`."""
        query = parse(ListQuery, query if query is not None else params, "query")
        with self._scope.runtime.storage.read() as tx:
            rows = tx.query(
                f"SELECT {_COLUMNS} FROM wallets WHERE org_id = ? AND deleted_at IS NULL "
                + order_by(query),
                (self._scope.org_id,),
            )
        return ListOf[Wallet](data=[_wallet(row) for row in rows])

    def get(self, address: str) -> Row:
        """The stored row of a current wallet of this organization (internal fields too)."""
        address = _address(address)
        with self._scope.runtime.storage.read() as tx:
            row = tx.one(
                f"SELECT {_COLUMNS} FROM wallets"
                " WHERE org_id = ? AND address = ? AND deleted_at IS NULL",
                (self._scope.org_id, address),
            )
        if row is None:
            raise NotFound("Wallet not found")
        return row

    def send_transaction(
        self, chain_id: int, address: str, *, to: str, data: bytes = b"", value: int = 0
    ) -> str:
        """Sign with custody and broadcast from a managed wallet; return the hash."""
        wallet = self.get(address)
        if wallet["type"] != "managed" or wallet["custody_ref"] is None:
            raise ValidationError.field("path", "address", "tracked wallets cannot sign")
        runtime = self._scope.runtime
        return runtime.signer.send(
            runtime.chains.get(chain_id),
            custody_ref=wallet["custody_ref"],
            sender=wallet["address"],
            to=_address(to),
            data=data,
            value=value,
        )

    def delete(self, address: str) -> Deleted:
        """Remove the wallet from the organization; custody keeps its key material."""
        address = _address(address)
        runtime = self._scope.runtime
        with runtime.storage.transaction() as tx:
            changed = tx.execute(
                "UPDATE wallets SET deleted_at = ?, updated_at = ?"
                " WHERE org_id = ? AND address = ? AND deleted_at IS NULL",
                (runtime.now_text(), runtime.now_text(), self._scope.org_id, address),
            )
        if not changed:
            raise NotFound("Wallet not found")
        return Deleted()


def _wallet(row: Row) -> Wallet:
    return Wallet.model_validate(row)


def _address(value: str) -> str:
    return str(parse_value(Address, value, "path", "address"))
