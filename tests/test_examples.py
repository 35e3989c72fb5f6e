"""The examples run: the webhook receiver verifies real deliveries and handles each once;
the host app serves its routes and treasury's; the client script and the walkthrough
notebook (a percent-format script) run to the end."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from treasury import Treasury
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .processes import clean_env, free_port, stop
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
        new_storage_url("e.db"),
        master_key=MASTER_KEY,
        chains={},
        allow_private_webhook_urls=True,
    )
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


def test_the_host_app_serves_its_routes_and_treasurys(treasury, tenant):
    host = load("host_app").create_host_app(treasury)
    with serve(host) as url:
        assert httpx.get(f"{url}/health").json() == {"ok": True}
        keyed = {"x-api-key": tenant.secret}
        assert httpx.get(f"{url}/treasury/v1/wallets", headers=keyed).json()["count"] == 0
        missing = httpx.get(f"{url}/treasury/v1/nowhere", headers=keyed)
        assert missing.status_code == 404 and "error" in missing.json()  # treasury's JSON


def test_the_client_script_runs_against_a_live_server(treasury, tenant, base_url):
    env = {**os.environ, "TREASURY_URL": base_url, "TREASURY_API_KEY": tenant.secret}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "client_script.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Renamed by the client" in done.stdout and "as expected: Wallet not found" in done.stdout


def test_the_walkthrough_notebook_runs_as_a_script(tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "walkthrough.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout and "apy" in done.stdout


def test_the_webhook_receiver_shows_every_family_and_ignores_an_older_event():
    """The example prints what each event is about (not "None" for a transfer or a
    deposit) and applies, per object, only an event newer than the last one applied."""
    receiver = load("webhook_receiver")
    transfer = {"id": "t1", "status": "completed", "from": {"amount": "5", "currency": "usdc"}}
    deposit = {"address": "0xabc", "token": "USDC", "amount": "2.5", "transactionHash": "0x1",
               "logIndex": 0}  # fmt: skip
    shown = receiver.describe({"type": "transfer.completed", "data": transfer})
    assert "None" not in shown and "t1 completed" in shown and "5 usdc" in shown
    shown = receiver.describe({"type": "deposit.received", "data": deposit})
    assert shown == "2.5 USDC to 0xabc"
    applied: list[str] = []
    handle = receiver.latest(lambda payload: applied.append(payload["type"]))
    for kind, number in (("transfer.completed", 3), ("transfer.submitted", 2)):
        handle({"type": kind, "sequence": number, "data": {**transfer, "status": kind}})
    handle({"type": "transfer.created", "sequence": 1, "data": {**transfer, "id": "t2"}})
    assert applied == ["transfer.completed", "transfer.created"]  # the late retry ignored


def test_the_host_app_runs_as_its_docstring_says_on_the_port_given(tmp_path):
    """`PORT=… python examples/host_app.py`: the host's route and treasury's API answer
    on that port (not a hard-coded 5000)."""

    port = free_port()
    env = clean_env(
        {"PORT": str(port), "TREASURY_MASTER_KEY": MASTER_KEY, "PYTHONPATH": str(EXAMPLES.parent)}
    )
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "host_app.py")], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        assert health.json() == {"ok": True}
        api = httpx.get(f"http://127.0.0.1:{port}/treasury/v1/yield/artifacts", timeout=5)
        assert api.status_code == 200 and api.json()["count"] == 0
    finally:
        stop(process)
