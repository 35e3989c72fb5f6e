"""Webhooks: the registry, which targets are allowed, and delivery of the events in the
durable outbox (`treasury._records.events`, where every domain emits them): Standard
Webhooks signatures, retries, the dispatcher job."""

from .models import CreatedWebhook, CreateWebhook, Delivery, Webhook
from .operations import Webhooks

__all__ = ["CreateWebhook", "CreatedWebhook", "Delivery", "Webhook", "Webhooks"]
