from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from .common import Address, Body, Resource

EventName = Literal["transaction.confirmed", "transaction.failed"]
EVENT_NAMES: tuple[EventName, ...] = ("transaction.confirmed", "transaction.failed")


class CreateWebhook(Body):
    url: Annotated[str, StringConstraints(min_length=1, max_length=2048)]
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


class CreatedWebhook(Webhook):
    secret: str
