"""kill -9 between the write-ahead commit and the broadcast: nothing lost, nothing twice.

A subprocess creates a deposit transfer on a real anvil node and is killed (SIGKILL) the
moment it first broadcasts — after its signed legs and the transfer were committed. The
job of another process then finishes the transfer with exactly those bytes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime

from treasury import IdempotencyInFlight, Treasury
from treasury._infra.idempotency import LEASE
from treasury.anvil import fund
from treasury.evm.abi import BALANCE_OF

from .conftest import MASTER_KEY, make_tenant
from .helpers import swap

CHAIN = 31337
CRASHING = textwrap.dedent(
    """
    import json, os, signal, sys
    from treasury import Treasury
    config, db, secret, body = json.loads(sys.argv[1])
    t = Treasury.open(db, master_key="0" * 64, chains={31337: config})
    chain = t.chain(31337)
    def die(raw):  # the first broadcast: everything is committed, nothing is sent
        os.kill(os.getpid(), signal.SIGKILL)
    chain.send_raw_transaction = die
    t.for_api_key(secret).transfers.create(body, idempotency_key="crash")
    """
)


def test_a_transfer_killed_before_its_broadcast_is_finished_once(anvil_config, new_storage_url):
    import json

    db = new_storage_url("crash.db")
    now = [datetime.now(UTC)]
    t = Treasury.open(db, master_key=MASTER_KEY, chains={CHAIN: anvil_config}, clock=lambda: now[0])
    tenant = make_tenant(t)
    wallet = tenant.org.wallets.create(label="Ops").address
    fund(anvil_config["url"], anvil_config, wallet, "ETH", "1")
    fund(anvil_config["url"], anvil_config, wallet, "USDC", "100")
    chain = t.chain(CHAIN)

    def usdc() -> int:
        data = chain.call(anvil_config["addresses"]["USDC"], BALANCE_OF.encode(wallet))
        return int(BALANCE_OF.decode(data)[0])

    body = swap("deposit", wallet, wallet, "40")
    arguments = json.dumps([anvil_config, db, tenant.secret, body])
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING, arguments], capture_output=True, text=True, timeout=120
    )
    assert crashed.returncode == -9, crashed.stderr

    with t.storage.read() as tx:
        transfer = tx.one("SELECT id, stage, status FROM transfers")
        legs = tx.query("SELECT hash, sent FROM transfer_legs ORDER BY position")
    assert transfer["stage"] == "claimed" and transfer["status"] == "pending"
    assert [leg["sent"] for leg in legs] == [0, 0] and usdc() == 100_000_000  # nothing sent
    try:
        tenant.org.transfers.create(body, idempotency_key="crash")
        raise AssertionError("a claim in flight must answer 409")
    except IdempotencyInFlight:
        pass
    assert t.run_once()["transfers_finished"] == 0  # the dead request's lease still holds

    now[0] += 2 * LEASE  # past the lease the dead request took
    summary = t.run_once()
    assert summary["transfers_finished"] == 1 and not summary.errors, summary
    t.run_once()  # the swap's receipt: completed
    finished = tenant.org.transfers.get(transfer["id"])
    assert finished.status == "completed"
    assert finished.transaction_hash == legs[-1]["hash"]  # the same signed bytes
    assert usdc() == 60_000_000  # the wallet paid once
    replay = tenant.org.transfers.create(body, idempotency_key="crash")
    assert replay.replayed and replay.id == transfer["id"]
    assert replay.transaction_hash == legs[-1]["hash"]
    t.close()
