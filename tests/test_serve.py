"""`treasury serve` alone, on the embedded defaults, as a new user starts it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from .conftest import MASTER_KEY, cli_storage
from .helpers import swap
from .processes import clean_env, serving

ENV = {"TREASURY_MASTER_KEY": MASTER_KEY}
CHAIN = 31337


@pytest.fixture
def fresh(tmp_path, storage_url):
    """A fresh folder where `treasury init` ran; the API key it printed."""
    cli_storage(tmp_path, storage_url)
    init = subprocess.run(
        [sys.executable, "-m", "treasury.cli", "init", "--json"],
        cwd=tmp_path, env=clean_env(ENV), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return tmp_path, json.loads(init.stdout)["apiKey"]["secret"]


def test_alone_it_funds_confirms_and_completes_a_deposit(fresh):
    cwd, secret = fresh
    with (
        serving(cwd, "--interval", "0.5", env=ENV) as server,
        httpx.Client(base_url=server.base, headers={"x-api-key": secret}, timeout=60) as api,
    ):
        made = api.post("/wallets", json={}, headers={"Idempotency-Key": "w"})
        assert made.status_code == 201, (made.text, server.output())
        wallet = made.json()
        funded = api.post(
            f"/test-helpers/{CHAIN}/faucet",
            json={"address": wallet["address"], "token": "USDC", "amount": "250.5"},
        )
        assert funded.status_code == 200, funded.text
        tx_hash = funded.json()["transactionHash"]
        balances = api.get(f"/{CHAIN}/balances/{wallet['address']}").json()["data"]
        assert {b["symbol"]: b["raw"] for b in balances}["USDC"] == "250500000"

        usdc = next(b["token"] for b in balances if b["symbol"] == "USDC")
        recorded = api.post(
            f"/{CHAIN}/transactions",
            json={
                "hash": tx_hash, "type": "other", "from": wallet["address"], "contract": usdc,
                "token": usdc, "amount": "250500000", "walletId": wallet["id"],
            },
        )  # fmt: skip
        assert recorded.json()["status"] == "pending"
        deadline = time.monotonic() + 30  # no run_once, no worker: serve's own jobs
        while (status := api.get(f"/{CHAIN}/transactions/{tx_hash}").json()["status"]) == "pending":
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
        assert status == "confirmed"
        while "transactions_confirmed=1" not in server.output():  # logged as the pass ends
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.1)
        assert "jobs pass: " in server.output()

        # and a deposit transfer goes all the way to completed
        for token, amount in (("ETH", "1"), ("USDC", "10")):
            faucet = {"address": wallet["address"], "token": token, "amount": amount}
            assert api.post(f"/test-helpers/{CHAIN}/faucet", json=faucet).status_code == 200
        deposit = swap("deposit", wallet["address"], wallet["address"], "10")
        moved = api.post("/transfers", json=deposit, headers={"Idempotency-Key": "d"}).json()
        deadline = time.monotonic() + 30
        while (state := api.get(f"/transfers/{moved['id']}").json()["status"]) != "completed":
            assert state in ("pending", "submitted") and time.monotonic() < deadline, state
            time.sleep(0.2)


def test_with_no_worker_no_job_runs(fresh):
    cwd, _ = fresh
    with serving(cwd, "--no-worker", "--interval", "0.2", env=ENV) as server:
        time.sleep(1.5)
        assert "jobs pass" not in server.output()
    with serving(cwd, "--interval", "0.2", env=ENV) as server:
        time.sleep(1.5)
        assert "jobs pass" in server.output()


def test_idle_half_sent_connections_do_not_starve_it(fresh):
    cwd, secret = fresh
    with serving(cwd, env=ENV) as server:
        host, port = server.base.removeprefix("http://").removesuffix("/v1").split(":")
        idle = []
        try:
            for _ in range(150):  # more than waitress's default connection limit (100)
                s = socket.create_connection((host, int(port)), timeout=5)
                s.sendall(b"GET /v1/wallets HTTP/1.1\r\nHost: x\r\n")  # never finished
                idle.append(s)
            r = httpx.get(f"{server.base}/wallets", headers={"x-api-key": secret}, timeout=10)
            assert r.status_code == 200
        finally:
            for s in idle:
                s.close()


def test_the_faucet_is_absent_where_the_chain_cannot_mint(anvil_config, new_storage_url):
    from treasury import Treasury
    from treasury.http import create_app
    from treasury.testing.server import serve

    from .conftest import make_tenant

    chain = {k: v for k, v in anvil_config.items() if k != "minter_key"}  # a "real" chain
    t = Treasury.open(new_storage_url("f.db"), master_key=MASTER_KEY, chains={CHAIN: chain})
    tenant = make_tenant(t)
    body = {"address": "0x" + "42" * 20, "token": "USDC", "amount": "1"}
    with serve(create_app(t)) as url:
        r = httpx.post(
            f"{url}/v1/test-helpers/{CHAIN}/faucet", json=body, headers={"x-api-key": tenant.secret}
        )
    assert r.status_code == 404 and r.json() == {"error": f"Chain {CHAIN} has no test helpers"}
    t.close()
