"""Webhooks: the registry, which targets are allowed, and delivery of the events in the
durable outbox (`treasury._records.events`, where every domain emits them): Standard
Webhooks signatures, retries, the dispatcher job."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import CreatedWebhook, CreateWebhook, Delivery, Webhook

if _typing.TYPE_CHECKING:
    from .operations import Webhooks


__all__ = ["CreateWebhook", "CreatedWebhook", "Delivery", "Webhook", "Webhooks"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"Webhooks": ".operations"})
