"""Recipients: the organization's address book, one entry per address."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .._infra import audit
from .._infra.chains import DestinationRefused
from .._infra.group import Group
from .._infra.models import Deleted, ListOf, ListQuery, RowId
from .._infra.runtime import Runtime
from .._infra.validation import parse_input, parse_value
from .._records import policy
from ..backends.storage.base import Transaction
from ..errors import NotFound
from . import store
from .models import CreateRecipient, Recipient, UpdateRecipient

Chunk = list[Recipient]  # (`list` is a method's name in the class)


class Recipients(Group):
    name = "recipients"

    def create(
        self,
        body: CreateRecipient | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Recipient:
        """Save an address with a label; an address already saved is a 409."""
        request = parse_input(CreateRecipient, body, fields)
        _check_address(self._scope.runtime, request.address)

        def insert(tx: Transaction) -> Recipient:
            scope = self._scope
            policy.guard_address_book(tx, scope.org_id, scope.admin)  # as it commits
            now = scope.runtime.now_text()
            return Recipient.model_validate(
                store.insert(tx, scope.org_id, request.address, request.label, now)
            )

        return self._in_one_transaction("create", idempotency_key, request, insert, Recipient)

    def list(
        self, query: ListQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> ListOf[Recipient]:
        """Every saved recipient, sorted by `sort` and `order`."""
        chunks = self.chunks(query, **params)
        return ListOf[Recipient](data=[item for chunk in chunks for item in chunk])

    def chunks(
        self, query: ListQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> Iterator[Chunk]:
        """`list`'s items a few hundred at a time, read from the store as they are
        consumed (how HTTP streams them). It holds a read snapshot of this thread until
        exhausted or closed: consume it before using the treasury again in the thread."""
        query = parse_input(ListQuery, query, params, "query")
        with self._scope.runtime.storage.read() as tx:
            for rows in store.every(tx, self._scope.org_id, query):
                yield [Recipient.model_validate(row) for row in rows]

    def update(
        self,
        recipient_id: int | str,
        body: UpdateRecipient | Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Recipient:
        """Change a recipient's address (lowercased), label, or both; `updated_at` moves."""
        number = parse_value(RowId, recipient_id, "path", "id")
        request = parse_input(UpdateRecipient, body, fields)
        runtime = self._scope.runtime
        if request.address is not None:
            _check_address(runtime, request.address)
        with runtime.storage.transaction() as tx:
            if request.address is not None:  # re-pointing: a label alone keeps `payments`
                policy.guard_address_book(tx, self._scope.org_id, self._scope.admin)
            row = store.change(
                tx, self._scope.org_id, number, request.address, request.label, runtime.now_text()
            )
            if row is not None:
                audit.record(tx)
        if row is None:
            raise NotFound("Recipient not found")
        return Recipient.model_validate(row)

    def delete(self, recipient_id: int | str) -> Deleted:
        """Remove a recipient; its address may be saved again."""
        number = parse_value(RowId, recipient_id, "path", "id")
        runtime = self._scope.runtime
        with runtime.storage.transaction() as tx:
            policy.guard_address_book(tx, self._scope.org_id, self._scope.admin)
            removed = store.remove(tx, self._scope.org_id, number, runtime.now_text())
            if removed:
                audit.record(tx)
        if not removed:
            raise NotFound("Recipient not found")
        return Deleted()


def _check_address(runtime: Runtime, address: str) -> None:
    """400 at ``address`` when value sent there would be lost."""
    try:
        runtime.chains.check_destination(address)
    except DestinationRefused as refused:
        raise refused.at("body", "address") from None
