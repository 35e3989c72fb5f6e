"""An audit event as `GET /v1/audit-events` answers it."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from .._infra.models import Resource


class AuditActor(Resource):
    """Who acted: an API key and its user, or ``{"admin": true}`` (Python or the CLI,
    without a key)."""

    api_key_id: str | None = Field(default=None, exclude_if=lambda value: value is None)
    user_id: str | None = Field(default=None, exclude_if=lambda value: value is None)
    admin: bool | None = Field(default=None, exclude_if=lambda value: value is None)


class AuditEvent(Resource):
    """One request that changed state, or was refused, or one admin action.

    `operation` is its name in the table of operations (``"transfers.create"``), or
    ``"admin.<method>"`` for an admin action; `object_id` is the id of the object it
    acted on as the API answers it (``"7"`` for a path's ``007``, an address lowercase),
    the one its path named when refused, else None. `prev_hash` is the `hash` of the
    organization's previous event (64 zeros for its first) and `hash` the SHA-256 of its
    keyed tag (the HMAC-SHA256, under a key derived from the master key, of this event's
    canonical JSON without `prevHash` and `hash`) followed by `prev_hash`."""

    id: str
    at: datetime
    actor: AuditActor
    operation: str
    object_type: str
    object_id: str | None
    status: int
    request_id: str | None
    prev_hash: str
    hash: str
