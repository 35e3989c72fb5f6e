"""examples/webhook_receiver.py as its docstring says to run it: a local `treasury serve`
started with TREASURY_ALLOW_PRIVATE_WEBHOOK_URLS=1, the receiver's loopback URL
registered, the receiver started with the secret, and a recorded transaction's
`transaction.confirmed` printed by the receiver. All real processes on loopback."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .processes import clean_env, free_port, serving
from .test_serve import ENV, fresh  # noqa: F401  (the fixture: a folder where init ran)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "webhook_receiver.py"
CHAIN = 31337


def _docstring_setting() -> str:
    text = EXAMPLE.read_text()
    (setting,) = re.findall(r"(TREASURY_ALLOW_PRIVATE_WEBHOOK_URLS=1) treasury serve", text)
    return setting


@pytest.mark.slow
def test_the_receiver_gets_a_delivery_from_a_local_serve(fresh, tmp_path) -> None:  # noqa: F811
    cwd, secret = fresh
    name, value = _docstring_setting().split("=")
    port = free_port()
    with (
        serving(cwd, "--interval", "0.3", env={**ENV, name: value}) as server,
        httpx.Client(base_url=server.base, headers={"x-api-key": secret}, timeout=60) as api,
    ):
        hook = api.post(
            "/webhooks",
            json={
                "url": f"http://127.0.0.1:{port}/webhooks/treasury",
                "events": ["transaction.confirmed", "transaction.failed"],
            },
        )
        assert hook.status_code == 201, hook.text
        printed = tmp_path / "receiver.out"
        with printed.open("wb") as sink:
            receiver = subprocess.Popen(
                [sys.executable, str(EXAMPLE)],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=clean_env({"WEBHOOK_SECRET": hook.json()["secret"], "PORT": str(port)}),
            )
        try:
            _wait_for_port(port, receiver)
            wallet = api.post("/wallets", json={}, headers={"Idempotency-Key": "w"}).json()
            funded = api.post(
                f"/test-helpers/{CHAIN}/faucet",
                json={"address": wallet["address"], "token": "ETH", "amount": "0.1"},
            )
            tx_hash = funded.json()["transactionHash"]
            address = wallet["address"]
            recorded = api.post(
                f"/{CHAIN}/transactions",
                json={
                    "hash": tx_hash,
                    "type": "other",
                    "from": address,
                    "contract": address,
                    "token": address,
                    "amount": "0",
                    "walletId": wallet["id"],
                },
            )
            assert recorded.status_code == 201, recorded.text
            deadline = time.monotonic() + 60
            while f"transaction.confirmed: {tx_hash}" not in printed.read_text():
                assert time.monotonic() < deadline, (printed.read_text(), server.output())
                assert receiver.poll() is None, printed.read_text()
                time.sleep(0.2)
        finally:
            receiver.terminate()
            receiver.wait(timeout=15)


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, "the receiver exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "the receiver did not listen"
            time.sleep(0.1)
