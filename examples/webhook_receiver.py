"""A webhook receiver for treasury's deliveries: verify, then handle each event once.

Run it (``pip install flask standardwebhooks``), then register its URL::

    WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py   # listens on :9000

* The signature is checked with the `standardwebhooks` library (the Standard Webhooks
  1.0 headers ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``); a delivery
  that does not verify, or whose timestamp is more than five minutes off, is a 400.
* ``webhook-id`` is the same on every retry of one delivery: it is the idempotency key,
  so an event handled once is acknowledged again without handling it twice.
* Answer 2xx quickly: anything else is retried (5 s, 5 min, 30 min, … 24 h); 410 tells
  treasury to stop sending to this URL.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def create_receiver(
    secret: str, handle: Callable[[dict[str, Any]], None], seen: set[str] | None = None
) -> Flask:
    """A Flask app that verifies each delivery and calls `handle(payload)` once per
    ``webhook-id`` (`seen` holds the ids handled; use a database table in production)."""
    app = Flask("webhook-receiver")
    verifier = Webhook(secret)
    handled = seen if seen is not None else set()
    lock = threading.Lock()

    @app.post("/webhooks/treasury")
    def receive() -> Response:
        try:
            payload = verifier.verify(request.get_data(), dict(request.headers))
        except WebhookVerificationError:
            return Response("bad signature", status=400)
        message_id = request.headers["webhook-id"]
        with lock:
            first = message_id not in handled
            handled.add(message_id)
        if first:
            handle(payload)  # {"type": "transaction.confirmed", "timestamp": ..., "data": {...}}
        return Response(status=204)

    return app


if __name__ == "__main__":

    def show(payload: dict[str, Any]) -> None:
        data = payload["data"]
        print(f"{payload['type']}: {data['hash']} on chain {data['chainId']} ({data['status']})")

    create_receiver(os.environ["WEBHOOK_SECRET"], show).run(port=9000)
