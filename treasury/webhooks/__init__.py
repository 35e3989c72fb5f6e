"""Webhooks: the registry, which targets are allowed, the durable event outbox, and
delivery (Standard Webhooks signatures, retries, the dispatcher job)."""

from .models import CreatedWebhook, CreateWebhook, Delivery, Webhook
from .operations import Webhooks

__all__ = ["CreateWebhook", "CreatedWebhook", "Delivery", "Webhook", "Webhooks"]
