"""Signing a delivery: Standard Webhooks 1.0, plus the original service's header.

* ``webhook-id``: the delivery's message id, the same on every retry (a receiver's
  idempotency key); ``webhook-timestamp``: unix seconds of the attempt;
  ``webhook-signature``: ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`` keyed by
  the base64-decoded secret after ``whsec_``.
* ``X-Webhook-Signature``: ``t=<timestamp>,v1=<hex HMAC-SHA256 of "{t}.{body}">`` keyed by
  the secret's text after ``whsec_``, for receivers written for the original service.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)
#: The purpose under which a webhook's secret is encrypted at rest (and decrypted to sign).
SECRET_PURPOSE = "webhook-secret"  # noqa: S105 (a name, not a secret)


def signed_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers that sign `body` for one attempt of one delivery."""
    key = secret.removeprefix(SECRET_PREFIX)
    standard = hmac.new(
        base64.b64decode(key), f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256
    ).digest()
    original = hmac.new(key.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": "v1," + base64.b64encode(standard).decode(),
        "X-Webhook-Signature": f"t={timestamp},v1={original.hexdigest()}",
    }
