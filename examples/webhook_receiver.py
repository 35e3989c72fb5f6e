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
* Every payload carries ``sequence``, which grows in the order the changes were committed.
  One object's events arrive in that order at first, but a retry may come after a later
  event: `latest` keeps, per object, only the newest event applied, and an older one
  changes nothing.
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


def object_of(payload: dict[str, Any]) -> str:
    """What an event is about: a transfer (its id), a deposit (its log), a transaction."""
    data, kind = payload.get("data", {}), payload["type"].partition(".")[0]
    if kind == "transfer":
        return f"transfer {data.get('id')}"
    if kind == "deposit":
        return f"deposit {data.get('transactionHash')}#{data.get('logIndex')}"
    return f"transaction {data.get('hash')}"


def latest(handle: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """`handle` called only for an event newer (by ``sequence``) than the last one applied
    for its object; an older one (a late retry) is ignored. Keep this in your database."""
    applied: dict[str, int] = {}
    lock = threading.Lock()

    def newest_only(payload: dict[str, Any]) -> None:
        key, number = object_of(payload), int(payload.get("sequence", 0))
        with lock:
            if applied.get(key, -1) >= number:
                return
            applied[key] = number
        handle(payload)

    return newest_only


def describe(payload: dict[str, Any]) -> str:
    """One line per event, whatever its family."""
    data, kind = payload.get("data", {}), payload["type"].partition(".")[0]
    if kind == "transfer":
        sides = f"{data.get('from', {}).get('amount')} {data.get('from', {}).get('currency')}"
        return f"transfer {data.get('id')} {data.get('status')} ({sides})"
    if kind == "deposit":
        return f"{data.get('amount')} {data.get('token')} to {data.get('address')}"
    return f"{data.get('hash')} on chain {data.get('chainId')} ({data.get('status')})"


if __name__ == "__main__":

    def show(payload: dict[str, Any]) -> None:
        print(f"{payload['type']}: {describe(payload)}", flush=True)

    port = int(os.environ.get("PORT", "9000"))
    create_receiver(os.environ["WEBHOOK_SECRET"], latest(show)).run(host="127.0.0.1", port=port)
