"""Idempotency and faults of transfers that move value on-chain (the devnet and anvil)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from treasury import Treasury, UpstreamError
from treasury.backends.chain.devnet import DevnetChain
from treasury.errors import IdempotencyInFlight, NotFound
from treasury.evm.abi import ALLOWANCE, BALANCE_OF
from treasury.evm.signing import Signed, broadcast
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import events, swap

CHAIN = 31337


class RefusingDevnet(DevnetChain):
    """The real devnet, whose node refuses the next `refusals` broadcasts as a node that
    is unreachable would (a test double: a refusal cannot be produced on demand)."""

    refusals = 0

    def send_raw_transaction(self, raw: bytes) -> str:
        if self.refusals:
            self.refusals -= 1
            raise UpstreamError("chain 31337 unreachable: ConnectError")
        return super().send_raw_transaction(raw)


@pytest.fixture
def env(new_storage_url) -> Iterator[dict[str, Any]]:
    chain = RefusingDevnet()
    t = Treasury.open(new_storage_url("t.db"), master_key=MASTER_KEY, chains={CHAIN: chain})
    tenant = make_tenant(t)
    wallet = tenant.org.wallets.create(label="Ops").address
    chain.faucet(wallet, "ETH", "1")
    chain.faucet(wallet, "USDC", "100")
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}, timeout=60) as api,
    ):
        yield {"t": t, "chain": chain, "wallet": wallet, "api": api, "tenant": tenant, "url": url}
    t.close()


def usdc(env: dict[str, Any]) -> int:
    data = env["chain"].call(env["chain"].addresses["USDC"], BALANCE_OF.encode(env["wallet"]))
    return int(BALANCE_OF.decode(data)[0])


def count(env: dict[str, Any], table: str) -> int:
    with env["t"].storage.read() as tx:
        return int(tx.one(f"SELECT COUNT(*) AS n FROM {table}")["n"])


def test_replay_and_another_body(env):
    body = swap("deposit", env["wallet"], env["wallet"], "10")
    headers = {"Idempotency-Key": "pay-1"}
    first = env["api"].post("/v1/transfers", json=body, headers=headers)
    again = env["api"].post("/v1/transfers", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    other = env["api"].post("/v1/transfers", json={**body, "amount": "11"}, headers=headers)
    assert other.status_code == 422
    assert count(env, "transfers") == 1 and usdc(env) == 90_000_000


def test_twenty_threads_on_one_key_move_value_once(env):
    body = swap("deposit", env["wallet"], env["wallet"], "7")
    barrier, answers, lock = threading.Barrier(20), [], threading.Lock()

    def send() -> None:
        with httpx.Client(base_url=env["url"], headers={"x-api-key": env["tenant"].secret}) as c:
            barrier.wait()
            r = c.post("/v1/transfers", json=body, headers={"Idempotency-Key": "race"}, timeout=60)
        with lock:
            answers.append(r)

    threads = [threading.Thread(target=send) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = Counter(r.status_code for r in answers)
    assert set(statuses) <= {201, 409}, statuses
    created = [r for r in answers if r.status_code == 201]
    assert len({r.json()["id"] for r in created}) == 1
    assert sum("Idempotent-Replayed" not in r.headers for r in created) == 1
    assert count(env, "transfers") == 1 and count(env, "transfer_legs") == 2
    assert usdc(env) == 93_000_000  # one approval, one swap: the wallet paid once


def test_a_refused_broadcast_is_502_nothing_written_and_the_retry_runs(env):
    env["chain"].refusals = 1
    body = swap("deposit", env["wallet"], env["wallet"], "5")
    headers = {"Idempotency-Key": "refused"}
    refused = env["api"].post("/v1/transfers", json=body, headers=headers)
    assert refused.status_code == 502 and "unreachable" in refused.json()["error"]
    assert count(env, "transfers") == count(env, "transfer_legs") == 0
    assert count(env, "idempotency_keys") == 0 and usdc(env) == 100_000_000
    assert count(env, "events") == 0  # a refused claim was never announced
    retry = env["api"].post("/v1/transfers", json=body, headers=headers)
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry.headers
    made = retry.json()["id"]
    assert [(kind, data["id"]) for kind, data in events(env["t"])] == [
        ("transfer.created", made),
        ("transfer.submitted", made),
    ]
    assert usdc(env) == 95_000_000  # the nonces the refused signature used were reused


def test_an_unreachable_chain_is_502_and_nothing_is_written(new_storage_url):
    chains = {CHAIN: {"url": "http://127.0.0.1:9", "addresses": _ADDRESSES}}
    t = Treasury.open(new_storage_url("u.db"), master_key=MASTER_KEY, chains=chains)
    org = make_tenant(t).org
    wallet = org.wallets.create(label="Ops").address
    with pytest.raises(UpstreamError, match="unreachable"):
        org.transfers.create(swap("deposit", wallet, wallet, "1"), idempotency_key="k")
    with t.storage.read() as tx:
        assert tx.one("SELECT COUNT(*) AS n FROM transfers")["n"] == 0
        assert tx.one("SELECT COUNT(*) AS n FROM idempotency_keys")["n"] == 0
    t.close()


_ADDRESSES = {
    key: "0x" + f"{i:02x}" * 20
    for i, key in enumerate(("USDC", "USDT", "c0", "swap_facility", "earner_rate_source"), 1)
}


def test_a_deposit_behind_an_unmined_swap_approves_again(anvil_config, new_storage_url):
    """Two deposits from one wallet on anvil, the first's approval mined and its swap not
    yet (anvil mines on demand, in blocks too small for both): the allowance on the chain
    is the first swap's, so the second must approve again, or one of the swaps reverts.
    Both complete and the wallet receives exactly both amounts of c0."""
    from treasury.anvil import fund

    t = Treasury.open(new_storage_url("t.db"), master_key=MASTER_KEY, chains={CHAIN: anvil_config})
    org = make_tenant(t).org
    wallet = org.wallets.create(label="Ops").address
    for symbol, amount in (("ETH", "1"), ("USDC", "20")):
        fund(anvil_config["url"], anvil_config, wallet, symbol, amount)
    node = httpx.Client(base_url=anvil_config["url"], timeout=30)

    def rpc(method: str, *params: Any) -> Any:
        answer = node.post("", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        assert "error" not in answer.json(), answer.text
        return answer.json()["result"]

    def token(symbol: str, call: Any, *args: Any) -> int:
        data = "0x" + call.encode(*args).hex()
        return int(
            rpc("eth_call", {"to": anvil_config["addresses"][symbol], "data": data}, "latest"), 16
        )

    facility = anvil_config["addresses"]["swap_facility"]
    rpc("evm_setAutomine", False)
    rpc("evm_setBlockGasLimit", hex(260_000))  # an approval (100,000) or a swap (250,000)
    try:
        org.transfers.create(swap("deposit", wallet, wallet, "7"), idempotency_key="first")
        rpc("evm_mine")  # the approval; the swap does not fit beside it
        assert token("USDC", ALLOWANCE, wallet, facility) == 7_000_000  # enough for 5
        second = org.transfers.create(swap("deposit", wallet, wallet, "5"), idempotency_key="b")
        assert [leg.kind for leg in legs(t, second.id)] == ["approval", "deposit"]
        for _ in range(4):
            rpc("evm_mine")
    finally:
        rpc("evm_setBlockGasLimit", hex(30_000_000))
        rpc("evm_setAutomine", True)
    t.run_once()
    assert [x.status for x in org.transfers.list().data] == ["completed", "completed"]
    assert token("c0", BALANCE_OF, wallet) == 12 * 10 ** t.decimals(CHAIN, "c0")
    assert token("USDC", BALANCE_OF, wallet) == 8_000_000
    node.close()
    t.close()


def legs(t: Treasury, transfer_id: str) -> list[Any]:
    from treasury.transfers import store

    with t.storage.read() as tx:
        return store.legs(tx, transfer_id)


class GatewayDevnet(DevnetChain):
    """The real devnet behind a gateway that, `timeouts` times, passes a broadcast on to
    the node and then answers 504 (a test double: a gateway cannot be made to do that on
    demand)."""

    timeouts = 0

    def send_raw_transaction(self, raw: bytes) -> str:
        tx_hash = super().send_raw_transaction(raw)
        if self.timeouts:
            self.timeouts -= 1
            raise UpstreamError(f"chain {CHAIN} at http://gateway answered HTTP 504")
        return tx_hash


def test_a_gateway_error_after_the_broadcast_is_not_taken_for_a_refusal(new_storage_url):
    """The approval reaches the node, the gateway answers 504: that may have happened, so
    the claim stays in flight (409 to a retry), the job sends the same bytes again, and
    the key then replays the one transfer. The wallet pays once."""
    now = [datetime.now(UTC)]
    chain = GatewayDevnet()
    t = Treasury.open(
        new_storage_url("g.db"),
        master_key=MASTER_KEY,
        chains={CHAIN: chain},
        clock=lambda: now[0],
    )
    org = make_tenant(t).org
    wallet = org.wallets.create(label="Ops").address
    chain.faucet(wallet, "ETH", "1")
    chain.faucet(wallet, "USDC", "100")
    body = swap("deposit", wallet, wallet, "5")
    chain.timeouts = 1
    with pytest.raises(UpstreamError) as first:
        org.transfers.create(body, idempotency_key="gw")
    assert first.value.ambiguous and "504" in first.value.message
    with pytest.raises(IdempotencyInFlight):
        org.transfers.create(body, idempotency_key="gw")
    now[0] += timedelta(seconds=91)  # the claim's lease passes: the job finishes it
    assert t.run_once()["transfers_finished"] == 1
    replay = org.transfers.create(body, idempotency_key="gw")
    assert replay.replayed and replay.status in ("submitted", "completed")
    with t.storage.read() as tx:
        assert tx.one("SELECT COUNT(*) AS n FROM transfers")["n"] == 1
    data = chain.call(chain.addresses["USDC"], BALANCE_OF.encode(wallet))
    assert int(BALANCE_OF.decode(data)[0]) == 95_000_000  # one swap
    t.close()


class _Node:
    """A chain that refuses a re-sent transaction with "nonce too low" and then cannot
    look up its receipt (a test double: that moment cannot be produced on a real node)."""

    def send_raw_transaction(self, raw: bytes) -> str:
        raise UpstreamError("eth_sendRawTransaction failed: nonce too low (code -32000)")

    def receipts(self, hashes: list[str]) -> list[Any]:
        raise UpstreamError("chain 1 answered HTTP 503")  # as definite as a 503 looks


def test_nonce_too_low_without_a_receipt_lookup_is_not_a_refusal():
    signed = Signed(raw=b"\x02", hash="0x" + "ab" * 32, nonce=7)
    with pytest.raises(UpstreamError) as raised:
        broadcast(_Node(), [signed])  # type: ignore[arg-type]
    assert raised.value.ambiguous  # the transfer stays in flight: it may be mined


def test_no_status_moves_back_to_pending(env):
    """`pending` is only ever a first status: a move there changes nothing (and builds
    no empty ``IN ()``, which PostgreSQL refuses)."""
    from treasury.transfers import store

    created = (
        env["t"]
        .for_organization(env["tenant"].org.id)
        .transfers.create(
            swap("deposit", env["wallet"], env["wallet"], "1"), idempotency_key="back"
        )
    )
    with env["t"].storage.transaction() as tx:
        box = env["t"]._runtime.secrets
        assert store.move(tx, created.id, "pending", "2030-01-01T00:00:00+00:00", box=box) is False
        assert store.get(tx, created.id)["status"] == "submitted"


class PickyDevnet(DevnetChain):
    """The real devnet, whose node refuses the broadcasts numbered in `refuse` (counted
    from 1) with "insufficient funds" (a test double: a refusal cannot be had on demand)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse: set[int] = set()
        self.sent = 0

    def send_raw_transaction(self, raw: bytes) -> str:
        self.sent += 1
        if self.sent in self.refuse:
            raise UpstreamError("eth_sendRawTransaction failed: insufficient funds for gas")
        return super().send_raw_transaction(raw)


def test_a_refused_leg_after_others_fails_the_transfer_and_tracks_only_what_went_out(
    new_storage_url,
):
    """The node takes the approval and refuses the swap for a reason it names: the
    transfer is `failed`, and only the approval, the leg that went out,
    is tracked."""
    chain = PickyDevnet()
    t = Treasury.open(new_storage_url("p.db"), master_key=MASTER_KEY, chains={CHAIN: chain})
    org = make_tenant(t).org
    wallet = org.wallets.create(label="Ops").address
    chain.faucet(wallet, "ETH", "1")
    chain.faucet(wallet, "USDC", "100")
    chain.refuse = {chain.sent + 2}  # the second broadcast: the swap
    failed = org.transfers.create(swap("deposit", wallet, wallet, "10"))
    assert failed.status == "failed"
    with t.storage.read() as tx:
        rows = tx.query(
            "SELECT kind, hash FROM transfer_legs WHERE transfer_id = ? ORDER BY position",
            (failed.id,),
        )
    assert [r["kind"] for r in rows] == ["approval", "deposit"]
    assert org.transactions.get(CHAIN, rows[0]["hash"]).hash == rows[0]["hash"]
    with pytest.raises(NotFound):
        org.transactions.get(CHAIN, rows[1]["hash"])  # never sent: not tracked
    t.close()
