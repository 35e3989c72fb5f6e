"""Webhooks: which targets are allowed, and the durable event outbox they deliver from."""
