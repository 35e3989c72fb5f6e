"""The webhook registry: URLs, subscribed events, optional wallet filter, signing secret."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping
from typing import Any

from .._infra import audit
from .._infra.clock import to_text
from .._infra.group import Group
from .._infra.models import Deleted, ListOf, Page, PageQuery, RowId
from .._infra.pagination import Cursors, page_of
from .._infra.validation import parse_input, parse_value
from ..backends.storage.base import Row, Transaction
from ..errors import Conflict, NotFound
from . import deliveries, store
from .dispatcher import LEASE, resend
from .models import (
    CreatedWebhook,
    CreateWebhook,
    Delivery,
    Webhook,
)
from .signing import SECRET_PREFIX, SECRET_PURPOSE
from .targets import check_target


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` + base64 of 24 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


class Webhooks(Group):
    name = "webhooks"

    def create(
        self,
        body: CreateWebhook | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> CreatedWebhook:
        """Register a webhook; the `whsec_` secret is returned this once, encrypted at rest."""
        request = parse_input(CreateWebhook, body, fields)
        runtime = self._scope.runtime
        check_target(request.url, allow_private=runtime.allow_private_webhook_urls)

        def insert(tx: Transaction) -> CreatedWebhook:
            secret = new_secret()
            row = store.insert(
                tx,
                self._scope.org_id,
                url=request.url,
                events=list(request.events),
                wallets=request.wallets,
                sealed_secret=runtime.secrets.encrypt(SECRET_PURPOSE, secret),
                now=runtime.now_text(),
            )
            return CreatedWebhook.model_validate(row | {"secret": secret})

        return self._in_one_transaction("create", idempotency_key, request, insert, CreatedWebhook)

    def list(self) -> ListOf[Webhook]:
        """The organization's webhooks, oldest first, without secrets."""
        with self._scope.runtime.storage.read() as tx:
            rows = store.current(tx, self._scope.org_id)
        return ListOf[Webhook](data=[Webhook.model_validate(row) for row in rows])

    def delete(self, webhook_id: int | str) -> Deleted:
        number = parse_value(RowId, webhook_id, "path", "id")
        runtime = self._scope.runtime
        with runtime.storage.transaction() as tx:
            removed = store.remove(tx, self._scope.org_id, number, runtime.now_text())
            if removed:
                audit.record(tx)
        if not removed:
            raise NotFound("Webhook not found")
        return Deleted()

    def deliveries(
        self,
        webhook_id: int | str,
        query: PageQuery | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> Page[Delivery]:
        """A webhook's deliveries, newest first, a page at a time (`cursor` from
        `next_cursor`)."""
        number = parse_value(RowId, webhook_id, "path", "id")
        query = parse_input(PageQuery, query, params, "query")
        org_id = self._scope.org_id
        with self._scope.runtime.storage.read() as tx:
            hook = self._hook(tx, number)
            rows, following = page_of(
                self._cursors(), org_id, query, lambda after, n: deliveries.page(tx, hook, after, n)
            )
        return Page[Delivery](data=[_delivery(row, number) for row in rows], next_cursor=following)

    def retry_delivery(self, webhook_id: int | str, delivery_id: str) -> Delivery:
        """Send one delivery again now, whatever its state (a receiver fixed, a missed
        event); the delivery after that attempt. A manual resend uses up no scheduled
        attempt and leaves the schedule as it was; a 2xx marks the delivery delivered."""
        number = parse_value(RowId, webhook_id, "path", "id")
        runtime = self._scope.runtime
        now = runtime.now()
        with runtime.storage.transaction() as tx:
            hook = self._hook(tx, number)
            row = deliveries.by_message(tx, hook, delivery_id)
            if row is None:
                raise NotFound("Delivery not found")
            if not deliveries.lease_one(tx, row["id"], to_text(now), to_text(now + LEASE)):
                raise Conflict("This delivery is being sent; try again in a moment")
            audit.record(tx)
        resend(runtime, row["id"])
        with runtime.storage.read() as tx:
            found = deliveries.by_message(tx, hook, delivery_id)
        assert found is not None
        return _delivery(found, number)

    def _hook(self, tx: Transaction, number: int) -> int:
        hook = store.internal_id(tx, self._scope.org_id, number)
        if hook is None:
            raise NotFound("Webhook not found")
        return hook

    def _cursors(self) -> Cursors:
        return Cursors(self._scope.runtime.secrets.derive("cursor:deliveries"), "deliveries")


def _delivery(row: Row, webhook_number: int) -> Delivery:
    return Delivery.model_validate(row | {"id": row["message_id"], "webhook_id": webhook_number})
