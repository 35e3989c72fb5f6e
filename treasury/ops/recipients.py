"""Recipients: the organization's address book, one entry per address."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._idempotency import run_once
from .._runtime import Scope
from .._validation import parse
from ..backends.storage.base import DuplicateKey, Transaction
from ..errors import Conflict
from ..models.common import ListOf, ListQuery
from ..models.recipients import CreateRecipient, Recipient
from ._sql import order_by

_COLUMNS = "id, address, label, created_at, updated_at"


class Recipients:
    def __init__(self, scope: Scope):
        self._scope = scope

    def create(
        self,
        body: CreateRecipient | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Recipient:
        """Save an address with a label; an address already saved is a 409."""
        request = parse(CreateRecipient, body if body is not None else fields)
        return run_once(
            self._scope,
            idempotency_key,
            ("POST", "/v1/recipients", request),
            lambda tx: self._insert(tx, request),
            Recipient,
        )

    def _insert(self, tx: Transaction, request: CreateRecipient) -> Recipient:
        now = self._scope.runtime.now_text()
        try:
            row = tx.one(
                "INSERT INTO recipients (org_id, address, label, created_at, updated_at)"
                f" VALUES (?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
                (self._scope.org_id, request.address, request.label, now, now),
            )
        except DuplicateKey:
            raise Conflict("A recipient with this address already exists") from None
        return Recipient.model_validate(row)

    def list(
        self, query: ListQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> ListOf[Recipient]:
        query = parse(ListQuery, query if query is not None else params, "query")
        with self._scope.runtime.storage.read() as tx:
            rows = tx.query(
                f"SELECT {_COLUMNS} FROM recipients WHERE org_id = ? " + order_by(query),
                (self._scope.org_id,),
            )
        return ListOf[Recipient](data=[Recipient.model_validate(row) for row in rows])
