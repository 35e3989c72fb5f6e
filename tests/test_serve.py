"""`treasury serve` alone, on the embedded defaults, as a new user starts it."""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

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
        cwd=tmp_path,
        env=clean_env(ENV),
        capture_output=True,
        text=True,
        check=True,
    )
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
                "hash": tx_hash,
                "type": "other",
                "from": wallet["address"],
                "contract": usdc,
                "token": usdc,
                "amount": "250500000",
                "walletId": wallet["id"],
            },
        )
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
    """Without the worker, serve says the jobs do not run here and none runs by the time
    it answers; with it, a pass is logged (waited for, with a deadline)."""
    cwd, secret = fresh
    with serving(cwd, "--no-worker", "--interval", "0.2", env=ENV) as server:
        answered = httpx.get(f"{server.base}/wallets", headers={"x-api-key": secret})
        assert answered.status_code == 200
        assert "jobs: none in this process (--no-worker)" in server.output()
        assert "jobs pass" not in server.output() and "jobs: a pass" not in server.output()
    with serving(cwd, "--interval", "0.2", env=ENV) as server:
        assert "jobs: a pass every 0.2s in this process" in wait_for_output(server, "jobs: a pass")
        wait_for_output(server, "jobs pass: ")


def wait_for_output(server, text: str, within: float = 30) -> str:
    """The server's output once it holds `text`; fails after `within` seconds."""
    deadline = time.monotonic() + within
    while text not in (output := server.output()):
        assert time.monotonic() < deadline and server.alive(), output
        time.sleep(0.05)
    return output


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


IDLE = 5_000


def test_thousands_of_idle_connections_neither_kill_it_nor_lock_clients_out(fresh):
    """Waitress on ``select()`` died at descriptor 1024; with a connection limit and no
    shedding, 5,000 idle sockets would keep real clients in the backlog."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = IDLE + 1_000
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the hard open-files limit ({hard}) is below {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    cwd, secret = fresh
    idle: list[socket.socket] = []
    try:
        with serving(cwd, "--no-worker", env=ENV) as server:
            host, port = server.base.removeprefix("http://").removesuffix("/v1").split(":")
            for _ in range(IDLE):  # no key, no byte sent
                idle.append(socket.create_connection((host, int(port)), timeout=30))
            with httpx.Client(headers={"x-api-key": secret}, timeout=10) as api:
                for _ in range(20):
                    r = api.get(f"{server.base}/wallets", headers={"Connection": "close"})
                    assert r.status_code == 200, r.text
            assert server.alive(), server.output()
            for s in idle:
                s.close()
            idle.clear()
            r = httpx.get(f"{server.base}/wallets", headers={"x-api-key": secret}, timeout=10)
            assert r.status_code == 200 and server.alive()
            assert "Traceback" not in server.output(), server.output()
    finally:
        for s in idle:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _written(pid: int) -> int:
    """Bytes the process has written through write() so far (files: the spooled body)."""
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(io["wchar"])


def _head(server_base: str) -> tuple[str, int]:
    host, port = server_base.removeprefix("http://").removesuffix("/v1").split(":")
    return host, int(port)


def _answer(s: socket.socket) -> bytes:
    chunks = []
    with contextlib.suppress(ConnectionResetError):  # unread upload left behind: a reset
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_declared_body_above_the_limit_is_413_before_a_byte_of_it_is_read(fresh):
    cwd, _ = fresh
    with serving(cwd, "--no-worker", env=ENV) as server:
        with socket.create_connection(_head(server.base), timeout=10) as s:
            s.sendall(
                b"POST /v1/wallets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 300000000\r\n\r\n"
            )  # and not one byte of the body: the answer may not wait for it
            answer = _answer(s)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 "), answer[:300]
        assert b"Content-Type: application/json" in head
        assert json.loads(body) == {"error": "Request body exceeds 1048576 bytes"}
        assert server.alive()


def _flood(s: socket.socket, total: int) -> None:
    chunk = b"x" * (1 << 20)
    with contextlib.suppress(OSError):  # the server hangs up at the limit
        for _ in range(total // len(chunk)):
            s.sendall(b"%x\r\n%b\r\n" % (len(chunk), chunk))


def test_a_chunked_body_is_cut_at_the_limit_and_nothing_is_spooled_to_disk(fresh):
    """Waitress spooled a body up to 1 GiB to a temporary file before the app could refuse
    it; now it stops reading at ``max_body_bytes``, which it holds in memory."""
    cwd, _ = fresh
    with serving(cwd, "--no-worker", env=ENV) as server:
        before = _written(server.process.pid)
        with socket.create_connection(_head(server.base), timeout=10) as s:
            s.sendall(
                b"POST /v1/wallets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            flood = threading.Thread(target=_flood, args=(s, 300_000_000), daemon=True)
            flood.start()
            answer = _answer(s)
            flood.join(timeout=60)
        assert not flood.is_alive()
        if answer:  # (a reset can overtake it)
            assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
        assert _written(server.process.pid) - before < 262_144
        assert server.alive()
        assert httpx.get(f"{server.base}/yield/artifacts", timeout=10).status_code == 200


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
