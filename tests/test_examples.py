"""The examples run: the webhook receiver verifies real deliveries and handles each once."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from treasury import Treasury
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .test_webhook_delivery import event

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_webhook_receiver_verifies_and_handles_each_event_once(new_storage_url):
    receiver = load("webhook_receiver")
    t = Treasury.open(
        new_storage_url("e.db"), master_key=MASTER_KEY, chains={},
        allow_private_webhook_urls=True,
    )  # fmt: skip
    org = make_tenant(t).org
    handled: list[dict[str, Any]] = []
    seen: set[str] = set()
    current: dict[str, Any] = {}  # the example app, built once the secret exists

    from flask import Flask, request

    host = Flask("host")

    @host.post("/webhooks/treasury")
    def forward():  # hands each request to the example app as it is
        app = current["app"]
        with app.test_request_context(
            "/webhooks/treasury",
            method="POST",
            data=request.get_data(),
            headers=dict(request.headers),
        ):
            return app.full_dispatch_request()

    with serve(host) as url:
        hook = org.webhooks.create(url=f"{url}/webhooks/treasury", events=["transaction.confirmed"])
        current["app"] = receiver.create_receiver(hook.secret, handled.append, seen)
        for _ in range(3):
            event(t, org.id)
        assert t.run_once()["webhooks_delivered"] == 3
        assert len(handled) == 3 and {p["type"] for p in handled} == {"transaction.confirmed"}
        first = org.webhooks.deliveries(hook.id).data[0]
        again = org.webhooks.retry_delivery(hook.id, first.id)  # the same webhook-id again
        assert again.status == "delivered" and len(handled) == 3  # acknowledged, not re-handled
        current["app"] = receiver.create_receiver("whsec_" + "A" * 32, handled.append, seen)
        event(t, org.id)
        t.run_once()
        assert org.webhooks.deliveries(hook.id).data[0].last_status_code == 400
    t.close()
