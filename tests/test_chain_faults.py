"""Faults on a chain with a block time and finality: `treasury serve --no-worker` and
`treasury worker`, each killed with SIGKILL again and again while a client posts deposits
and retries each key until it has an answer. At the end every accepted transfer is final
and the chain's own Transfer logs show each completed amount moved once and nothing more
(DESIGN §3 "Pays exactly once", "The chain can go back").

Real parts throughout: anvil mining a block every second, the service's own commands in
subprocesses on one store (SQLite file, or a PostgreSQL schema), HTTP on loopback."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import require_anvil
from tests.helpers import swap
from tests.processes import clean_env, free_port
from treasury import Treasury
from treasury.anvil import deploy_contracts, fund, start_anvil

CHAIN = 31337
TRANSFER = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
MASTER = "c" * 64
KILLS = 4  # of each process, at random moments while the run is posted
AMOUNTS = [Decimal("1.01") + Decimal(i) / 100 for i in range(12)]


@pytest.fixture(scope="module")
def chain() -> Iterator[dict[str, Any]]:
    require_anvil()
    with start_anvil(block_time=1) as node:
        yield deploy_contracts(node.url)


class Processes:
    """The API server and the worker, each restartable and killable."""

    def __init__(self, cwd: Path) -> None:
        self.cwd, self.port = cwd, free_port()
        self.env = clean_env({"TREASURY_CONFIG": str(cwd / "treasury.toml")})
        self.api = self.worker = None
        self.start_api()
        self.start_worker()

    def _run(self, *args: str) -> subprocess.Popen[bytes]:
        log = (self.cwd / f"{args[0]}.log").open("ab")
        return subprocess.Popen(
            [sys.executable, "-m", "treasury.cli", *args],
            cwd=self.cwd,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def start_api(self) -> None:
        self.api = self._run("serve", "--port", str(self.port), "--no-worker")

    def start_worker(self) -> None:
        self.worker = self._run("worker", "--interval", "1")

    def kill(self, which: str) -> None:
        process = getattr(self, which)
        process.send_signal(signal.SIGKILL)
        process.wait()
        getattr(self, f"start_{which}")()

    def stop(self) -> None:
        for process in (self.api, self.worker):
            process.kill()
            process.wait()


def post_until_answered(base: str, secret: str, body: dict[str, Any], key: str) -> httpx.Response:
    """POST a transfer with `key` until the service answers it (a dead server, a 502 or
    a 409 while in flight: the same key again, as a client should)."""
    deadline = time.monotonic() + 240  # a claim whose request died: its lease (90 s)
    while time.monotonic() < deadline:
        try:
            answer = httpx.post(
                f"{base}/transfers",
                json=body,
                headers={"x-api-key": secret, "idempotency-key": key},
                timeout=10,
            )
        except httpx.TransportError:
            time.sleep(0.3)
            continue
        if answer.status_code in (201, 400):
            return answer
        time.sleep(0.5)  # 409 in flight, 502 ambiguous: the worker resolves it
    raise AssertionError(f"no answer for {key}")


def test_kill_9_of_api_and_worker_on_a_chain_with_blocks_moves_each_transfer_once(
    chain: dict[str, Any], new_storage_url: Any, tmp_path: Path
) -> None:
    url = new_storage_url("faults.db")
    spec = {**chain, "confirmations": 2}
    config = {"storage": url, "master_key": MASTER, "chains": {str(CHAIN): spec}}
    (tmp_path / "treasury.toml").write_text(_toml(config))
    setup = Treasury.open(url, master_key=MASTER, chains={CHAIN: spec})
    org = setup.admin.create_organization("Acme")
    secret = setup.admin.create_api_key(org.id, user_id="ops").secret
    wallet = setup.for_api_key(secret).wallets.create(label="Payouts").address
    setup.close()
    fund(chain["url"], chain, wallet, "ETH", "1")
    fund(chain["url"], chain, wallet, "USDC", "100")

    processes = Processes(tmp_path)
    base = f"http://127.0.0.1:{processes.port}/v1"
    kills: list[str] = []

    def killer() -> None:  # at random moments: mid-request, mid-pass, mid-broadcast
        for which in ["api", "worker"] * KILLS:
            time.sleep(random.uniform(0.3, 1.5))
            kills.append(which)
            processes.kill(which)

    def post(i: int) -> tuple[str, Decimal]:
        time.sleep(i * 0.4)  # a client streaming a run
        body = swap("deposit", wallet, wallet, str(AMOUNTS[i]))
        answer = post_until_answered(base, secret, body, f"k{i}")
        assert answer.status_code == 201, answer.text
        return answer.json()["id"], AMOUNTS[i]

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        with ThreadPoolExecutor(4) as pool:
            accepted = dict(pool.map(post, range(len(AMOUNTS))))
        thread.join()
        final = _wait_final(base, secret, set(accepted))
    finally:
        processes.stop()

    assert {"api", "worker"} <= set(kills)  # the faults happened

    assert set(final.values()) == {"completed"}, final
    moved = _moved_out(chain, wallet)
    assert sorted(moved) == sorted(accepted.values())  # each once, nothing else


def _wait_final(base: str, secret: str, ids: set[str]) -> dict[str, str]:
    deadline, status = time.monotonic() + 150, {}
    while time.monotonic() < deadline:
        try:
            for transfer_id in ids:
                shown = httpx.get(
                    f"{base}/transfers/{transfer_id}", headers={"x-api-key": secret}, timeout=10
                )
                status[transfer_id] = shown.json()["status"]
        except httpx.TransportError:
            pass
        if len(status) == len(ids) and all(s in ("completed", "failed") for s in status.values()):
            return status
        time.sleep(1)
    raise AssertionError(f"not final in time: {status}")


def _moved_out(chain: dict[str, Any], wallet: str) -> list[Decimal]:
    """The USDC amounts the chain's Transfer logs show leaving `wallet`."""
    topic = "0x" + wallet.lower().removeprefix("0x").rjust(64, "0")
    query = {
        "fromBlock": "0x0",
        "toBlock": "latest",
        "address": chain["addresses"]["USDC"],
        "topics": [TRANSFER, topic],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs", "params": [query]}
    logs = httpx.post(chain["url"], json=body).json()["result"]
    return [Decimal(int(log["data"], 16)) / 10**6 for log in logs]


def _toml(config: dict[str, Any]) -> str:
    """The settings as TOML (strings, integers and nested tables only)."""
    lines: list[str] = []
    tables: list[tuple[str, dict[str, Any]]] = []

    def walk(prefix: str, values: dict[str, Any]) -> None:
        scalars = {k: v for k, v in values.items() if not isinstance(v, dict)}
        if prefix:
            lines.append(f"[{prefix}]")
        for key, value in scalars.items():
            lines.append(f"{key} = {json.dumps(value)}")
        for key, value in values.items():
            if isinstance(value, dict):
                tables.append((f"{prefix}.{key}" if prefix else key, value))

    walk("", config)
    while tables:
        walk(*tables.pop(0))
    return "\n".join(lines) + "\n"
