"""Webhooks as the API takes and shows them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import Field, StringConstraints, field_validator

from .._infra.models import Address, Body, PlainText, Resource

EventName = Literal[
    "transaction.confirmed",
    "transaction.failed",
    "transfer.created",
    "transfer.submitted",
    "transfer.completed",
    "transfer.failed",
    "deposit.received",
    "deposit.reversed",
    "reconciliation.break_opened",
    "reconciliation.break_resolved",
]
DeliveryId = Annotated[str, StringConstraints(pattern=r"^msg_[0-9a-f]{32}$")]
EVENT_NAMES: tuple[EventName, ...] = get_args(EventName)


class CreateWebhook(Body):
    url: Annotated[str, StringConstraints(min_length=1, max_length=2048), PlainText]
    events: Annotated[list[EventName], Field(min_length=1)]
    wallets: Annotated[list[Address], Field(min_length=1)] | None = None  # None: all wallets

    @field_validator("events", "wallets")
    @classmethod
    def _dedupe(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else list(dict.fromkeys(value))


class Webhook(Resource):
    """A registered webhook; `secret` is only set in the creation response."""

    id: int
    url: str
    events: list[EventName]
    created_at: datetime
    wallets: list[Address] | None
    active: bool = True  # False once a delivery was answered 410 Gone


class CreatedWebhook(Webhook):
    # its secret is shown once: the stored outcome of its key is sealed at rest (the
    # table's `Operation.sealed`)

    secret: str


class Delivery(Resource):
    """One event's delivery to one webhook; `id` is its `webhook-id` header (the same on
    every attempt), the receiver's idempotency key."""

    id: str
    webhook_id: int
    event_type: EventName
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: datetime | None
    created_at: datetime
    updated_at: datetime
