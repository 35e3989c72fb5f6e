"""A webhook receiver for treasury's deliveries: verify, then handle each event once.

Try it against a local ``treasury serve`` (``pip install flask standardwebhooks``)::

    # 1. serve, allowing webhooks to loopback (refused by default: targets must be public)
    TREASURY_ALLOW_PRIVATE_WEBHOOK_URLS=1 treasury serve
    # 2. register the receiver's URL; the answer's "secret" is shown this once
    curl -X POST http://127.0.0.1:8000/v1/webhooks -H "x-api-key: $KEY" \
      -H "Content-Type: application/json" -d '{"url": "http://127.0.0.1:9000/webhooks/treasury",
      "events": ["transaction.confirmed", "transaction.failed"]}'
    # 3. run it with that secret (PORT: another port than 9000)
    WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py

Then record a transaction of one of the organization's wallets (docs/quickstart.md): at
the next pass of the jobs it is confirmed and this prints ``transaction.confirmed: 0x…``.
In production the URL is public and the setting stays off.

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
        data = payload.get("data", {})
        where = f"{data.get('hash')} on chain {data.get('chainId')} ({data.get('status')})"
        print(f"{payload['type']}: {where}", flush=True)

    port = int(os.environ.get("PORT", "9000"))
    create_receiver(os.environ["WEBHOOK_SECRET"], show).run(host="127.0.0.1", port=port)
