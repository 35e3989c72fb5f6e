"""The webhook registry: URLs, subscribed events, optional wallet filter, signing secret."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Mapping
from typing import Any

from .._runtime import Scope
from .._validation import parse, parse_value
from ..backends.storage.base import Row
from ..errors import NotFound
from ..models.common import Deleted, ListOf, RowId
from ..models.webhooks import CreatedWebhook, CreateWebhook, Webhook
from ..webhooks.targets import check_target

SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)
_PURPOSE = "webhook-secret"
_COLUMNS = "id, url, events, wallets, created_at"


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` + base64 of 24 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


class Webhooks:
    def __init__(self, scope: Scope):
        self._scope = scope

    def create(
        self, body: CreateWebhook | Mapping[str, Any] | None = None, **fields: Any
    ) -> CreatedWebhook:
        """Register a webhook; the `whsec_` secret is returned this once, encrypted at rest."""
        request = parse(CreateWebhook, body if body is not None else fields)
        runtime = self._scope.runtime
        check_target(request.url, allow_private=runtime.allow_private_webhook_urls)
        secret = new_secret()
        with runtime.storage.transaction() as tx:
            row = tx.one(
                "INSERT INTO webhooks (org_id, url, events, wallets, secret, active, created_at)"
                f" VALUES (?, ?, ?, ?, ?, 1, ?) RETURNING {_COLUMNS}",
                (
                    self._scope.org_id,
                    request.url,
                    json.dumps(request.events),
                    None if request.wallets is None else json.dumps(request.wallets),
                    runtime.secrets.encrypt(_PURPOSE, secret),
                    runtime.now_text(),
                ),
            )
        assert row is not None
        return CreatedWebhook.model_validate(_decoded(row) | {"secret": secret})

    def list(self) -> ListOf[Webhook]:
        """The organization's webhooks, oldest first, without secrets."""
        with self._scope.runtime.storage.read() as tx:
            rows = tx.query(
                f"SELECT {_COLUMNS} FROM webhooks WHERE org_id = ? AND deleted_at IS NULL"
                " ORDER BY id",
                (self._scope.org_id,),
            )
        return ListOf[Webhook](data=[Webhook.model_validate(_decoded(row)) for row in rows])

    def delete(self, webhook_id: int | str) -> Deleted:
        webhook_id = parse_value(RowId, webhook_id, "path", "id")
        runtime = self._scope.runtime
        with runtime.storage.transaction() as tx:
            changed = tx.execute(
                "UPDATE webhooks SET deleted_at = ?, active = 0"
                " WHERE org_id = ? AND id = ? AND deleted_at IS NULL",
                (runtime.now_text(), self._scope.org_id, webhook_id),
            )
        if not changed:
            raise NotFound("Webhook not found")
        return Deleted()


def _decoded(row: Row) -> Row:
    wallets = row["wallets"]
    return row | {
        "events": json.loads(row["events"]),
        "wallets": None if wallets is None else json.loads(wallets),
    }
