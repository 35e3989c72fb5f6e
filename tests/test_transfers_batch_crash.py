"""kill -9 of the API and of the worker during a payout run of 100 deposits on anvil:
every accepted item ends final, none moves twice.

The API (a subprocess serving HTTP) takes a run of 100 deposits from one wallet, each to a
recipient of its own, on a chain mining a block every second; its wallets keep 40 legs in
flight, so 20 deposits are signed at once and the rest of the first chunk queued. It is
killed (SIGKILL) at its 25th broadcast: some legs went out, none was recorded. A worker
(another subprocess, whose clock is past the dead request's 90 s lease, as a worker's is
a few minutes later) is killed at its 15th broadcast while it finishes those claims with
their stored bytes. A second worker (later again: past the lease the dead worker took)
then runs to the end, and the client sends the same run again to a second API process: the items the first one accepted replay (or are
still in flight, 409, until the worker is done with them), the others are accepted now.
In the end the run's answer is 201 for each of the 100 items, every transfer is completed once, each
recipient holds exactly its amount, and the wallet's 200 legs have consecutive nonces.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.anvil import deploy_contracts, fund, start_anvil
from treasury.evm.abi import BALANCE_OF

from .conftest import MASTER_KEY, make_tenant, require_anvil
from .helpers import address, events, rpc, swap
from .processes import clean_env

CHAIN = 31337
ITEMS = 100
#: Seconds each later process's clock runs ahead: past the lease of the claims the one
#: before it took and died holding (90 s each), as when it starts that much later.
LATER = 200
PROCESS = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from datetime import UTC, datetime, timedelta
    from treasury import Settings, Treasury
    role, config, db, offset, kill_at = json.loads(sys.argv[1])
    t = Treasury.open(
        db,
        master_key="0" * 64,
        chains={31337: config},
        clock=lambda: datetime.now(UTC) + timedelta(seconds=offset),
        settings=Settings.load({"max_in_flight": 40}, env={}),
    )
    chain = t.chain(31337)
    if kill_at:
        send, send_many, calls = chain.send_raw_transaction, chain.send_raw_transactions, []
        def counted(raw):  # SIGKILL at the kill_at-th broadcast: nothing after it runs
            calls.append(raw)
            if len(calls) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return send(raw)
        def counted_many(raws):  # the legs sent together, counted one by one
            return [answer for raw in raws for answer in send_many([counted_first(raw)])]
        def counted_first(raw):
            calls.append(raw)
            if len(calls) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return raw
        chain.send_raw_transaction = counted
        chain.send_raw_transactions = counted_many
    if role == "api":
        from treasury.http import create_app
        from treasury.http.loopback import serve
        with serve(create_app(t)) as url:
            print(url, flush=True)
            while True:
                time.sleep(1)
    while True:
        t.run_once()
        time.sleep(0.2)
    """
)


@pytest.fixture(scope="module")
def chain() -> Iterator[tuple[str, dict[str, Any]]]:
    require_anvil()
    with start_anvil() as node:
        yield node.url, deploy_contracts(node.url)


@contextmanager
def started(role: str, config: dict[str, Any], db: str, offset: int, kill_at: int) -> Iterator[Any]:
    arguments = json.dumps([role, config, db, offset, kill_at])
    process = subprocess.Popen(
        [sys.executable, "-c", PROCESS, arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def died(process: Any, within: float = 120) -> None:
    """Wait for `process` to be killed by its own SIGKILL."""
    code = process.wait(timeout=within)
    assert code == -9, process.stderr.read()


def test_kill_9_of_the_api_and_the_worker_in_a_run_loses_and_duplicates_nothing(
    chain: tuple[str, dict[str, Any]], new_storage_url: Any
) -> None:
    url, config = chain
    db = new_storage_url("crash.db")
    t = Treasury.open(db, master_key=MASTER_KEY, chains={CHAIN: config})
    tenant = make_tenant(t)
    wallet = tenant.org.wallets.create(label="Payroll").address
    fund(url, config, wallet, "USDC", "6000")
    fund(url, config, wallet, "ETH", "10")
    rpc(url, "evm_setIntervalMining", 1)  # a block every second from now on
    recipients = [address().lower() for _ in range(ITEMS)]
    items = [swap("deposit", wallet, to, str(i + 1)) for i, to in enumerate(recipients)]
    headers = {"x-api-key": tenant.secret, "Idempotency-Key": "payroll"}

    with ExitStack() as running:
        api = running.enter_context(started("api", config, db, 0, kill_at=25))
        base = api.stdout.readline().strip()
        assert base.startswith("http://"), api.stderr.read()
        with pytest.raises(httpx.TransportError):  # the connection dies with the process
            httpx.post(
                f"{base}/v1/transfers/batch", json={"items": items}, headers=headers, timeout=120
            )
        died(api)
        with t.storage.read() as tx:
            stages = tx.query("SELECT stage, COUNT(*) AS n FROM transfers GROUP BY stage")
            legs = tx.one("SELECT COUNT(*) AS n FROM transfer_legs")["n"]
        assert {row["stage"]: row["n"] for row in stages} == {"claimed": 20, "queued": 30}
        assert legs == 40  # 20 deposits signed (40 legs in flight at most), none recorded

        worker = running.enter_context(started("worker", config, db, LATER, kill_at=15))
        died(worker)  # while it finished the dead request's claims with their stored bytes
        running.enter_context(started("worker", config, db, 2 * LATER, kill_at=0))
        again = running.enter_context(started("api", config, db, 2 * LATER, kill_at=0))
        base = again.stdout.readline().strip()

        deadline, answers = time.monotonic() + 180, []
        while True:  # the client sends the run again until its answer is kept
            answer = httpx.post(
                f"{base}/v1/transfers/batch", json={"items": items}, headers=headers, timeout=120
            )
            assert answer.status_code in (200, 409), answer.text  # 409: the run still held
            answers.append(answer)
            if answer.headers.get("Idempotent-Replayed") == "true":
                break
            assert time.monotonic() < deadline, answer.text
            time.sleep(1)
        statuses = [item["status"] for item in answers[-1].json()["data"]]
        assert statuses == [201] * ITEMS, statuses
        ids = [item["transfer"]["id"] for item in answers[-1].json()["data"]]
        assert len(set(ids)) == ITEMS

        while True:  # the worker takes every accepted transfer to its end
            with t.storage.read() as tx:
                rows = tx.query("SELECT id, status FROM transfers")
            if all(row["status"] in ("completed", "failed") for row in rows):
                break
            assert time.monotonic() < deadline, [r["status"] for r in rows]
            time.sleep(1)

    assert sorted(row["id"] for row in rows) == sorted(ids)  # one transfer per item
    assert {row["status"] for row in rows} == {"completed"}
    chain_ = t.chain(CHAIN)

    def held(token: str, owner: str) -> int:
        data = chain_.call(config["addresses"][token], BALANCE_OF.encode(owner))
        return int(BALANCE_OF.decode(data)[0])

    unit = 10 ** t.decimals(CHAIN, "c0")
    assert [held("c0", to) for to in recipients] == [(i + 1) * unit for i in range(ITEMS)]
    assert held("USDC", wallet) == (6000 - ITEMS * (ITEMS + 1) // 2) * 10**6
    with t.storage.read() as tx:
        nonces = [
            row["nonce"] for row in tx.query("SELECT nonce FROM transfer_legs ORDER BY nonce")
        ]
    assert nonces == list(range(nonces[0], nonces[0] + 2 * ITEMS))
    announced = [(kind, data["id"]) for kind, data in events(t, "transfer.")]
    for kind in ("transfer.created", "transfer.completed"):  # each once per transfer
        assert sorted(i for k, i in announced if k == kind) == sorted(ids)
    t.close()
