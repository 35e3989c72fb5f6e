"""Pays exactly once, never stuck: faults injected with real parts, money counted on-chain.

A real anvil node sits behind a real HTTP forwarder (`treasury.testing.forwarder`) that
can cut an answer after forwarding a request, or refuse connections; the fake fiat
provider is a real HTTP server (behind a forwarder too, to answer 500 after it performed
a POST). What moved is counted from the chain's Transfer logs and the provider's own
records, never from the service's view of itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.anvil import deploy_contracts, fund, start_anvil
from treasury.backends.fiat.http import HttpFiat
from treasury.errors import IdempotencyInFlight, UpstreamError, ValidationError
from treasury.evm.abi import BALANCE_OF
from treasury.testing.fake_provider import FakeProvider, fake_provider, onboard
from treasury.testing.forwarder import Forwarder, forwarder, rpc

from .conftest import MASTER_KEY, Tenant, make_tenant, require_anvil
from .helpers import BANK_ACCOUNT, address, events, offramp, onramp, swap

CHAIN = 31337
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
SEND = rpc("eth_sendRawTransaction")


@pytest.fixture(scope="module")
def node() -> Iterator[dict[str, Any]]:
    require_anvil()
    with start_anvil() as anvil:
        yield deploy_contracts(anvil.url)


def rpc_call(url: str, method: str, params: list[Any]) -> Any:
    answer = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    body = answer.json()
    assert "error" not in body, body
    return body["result"]


def transfers_to(node: dict[str, Any], token: str, to: str) -> list[dict[str, Any]]:
    """The token's Transfer logs to `to`, read from the node itself."""
    topic = "0x" + "0" * 24 + to.lower().removeprefix("0x")
    logs = rpc_call(
        node["url"],
        "eth_getLogs",
        [
            {
                "fromBlock": "0x0",
                "toBlock": "latest",
                "address": node["addresses"][token],
                "topics": [TRANSFER_TOPIC, None, topic],
            }
        ],
    )
    return list(logs)


def transfers_from(node: dict[str, Any], token: str, sender: str) -> list[dict[str, Any]]:
    topic = "0x" + "0" * 24 + sender.lower().removeprefix("0x")
    logs = rpc_call(
        node["url"],
        "eth_getLogs",
        [
            {
                "fromBlock": "0x0",
                "toBlock": "latest",
                "address": node["addresses"][token],
                "topics": [TRANSFER_TOPIC, topic],
            }
        ],
    )
    return list(logs)


def balance(node: dict[str, Any], token: str, owner: str) -> int:
    data = rpc_call(
        node["url"],
        "eth_call",
        [{"to": node["addresses"][token], "data": "0x" + BALANCE_OF.encode(owner).hex()}, "latest"],
    )
    return int(data, 16)


@dataclass
class Env:
    t: Treasury
    tenant: Tenant
    node: dict[str, Any]
    chain_fwd: Forwarder
    fiat_fwd: Forwarder
    fake: FakeProvider
    wallet: str
    bank: str
    now: list[datetime]
    url: str  # the store's

    def passes(self, n: int = 1) -> None:
        """`n` passes of the jobs, each after the claims' lease (90 s) has passed."""
        for _ in range(n):
            self.now[0] += timedelta(seconds=91)
            self.t.run_once()


@pytest.fixture
def env(node: dict[str, Any], new_storage_url) -> Iterator[Env]:
    def payout(chain_id: int, to: str, amount: str) -> str:
        return fund(node["url"], node, to, "USDC", amount)

    def arrived(chain_id: int, deposit_address: str, amount: str) -> bool:
        return balance(node, "USDC", deposit_address) >= int(float(amount) * 10**6)

    now = [datetime.now(UTC)]
    with (
        fake_provider(payout=payout, deposit_arrived=arrived) as fake,
        forwarder(fake.url.removesuffix("/v0")) as fiat_fwd,
        forwarder(node["url"]) as chain_fwd,
    ):
        fiat = HttpFiat(fiat_fwd.url + "/v0", api_key=fake.api_key, timeout=httpx.Timeout(5.0))
        # anvil mines on demand: a receipt is final here (finality: tests/test_chain_reorgs.py)
        spec = {"url": chain_fwd.url, "addresses": node["addresses"], "confirmations": 0}
        url = new_storage_url("t.db")
        t = Treasury.open(
            url,
            master_key=MASTER_KEY,
            fiat=fiat,
            chains={CHAIN: spec},
            clock=lambda: now[0],
        )
        tenant = make_tenant(t)
        onboard(t, tenant.org.id, fake)
        wallet = tenant.org.wallets.create(label="Ops").address
        fund(node["url"], node, wallet, "ETH", "1")
        fund(node["url"], node, wallet, "USDC", "10")
        bank = tenant.org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
        yield Env(t, tenant, node, chain_fwd, fiat_fwd, fake, wallet, bank, now, url)
        t.close()


def test_a_cut_answer_then_an_unreachable_node_moves_a_deposit_once(env: Env) -> None:
    """The approval reaches the node but its answer is cut (502, claim kept); the
    worker's retry finds the node unreachable — that must not free the key."""
    org, recipient = env.tenant.org, address().lower()
    body = swap("deposit", env.wallet, recipient, "2")
    env.chain_fwd.cut(when=SEND)
    with pytest.raises(UpstreamError):
        org.transfers.create(body, idempotency_key="once")
    env.chain_fwd.down()
    env.passes()  # the worker retries: unreachable
    with pytest.raises(IdempotencyInFlight):
        org.transfers.create(body, idempotency_key="once")
    (shown,) = org.transfers.list().data
    assert shown.status == "pending" and shown.failure_reason is None
    env.chain_fwd.up()
    env.passes(2)
    replay = org.transfers.create(body, idempotency_key="once")
    assert replay.id == shown.id and replay.replayed
    assert org.transfers.get(shown.id).status == "completed"
    c0 = 2 * 10 ** env.t.decimals(CHAIN, "c0")
    assert [int(log["data"], 16) for log in transfers_to(env.node, "c0", recipient)] == [c0]
    # announced once per status, from the claim the worker finished (none while in flight)
    assert [(kind, data["id"], data["status"]) for kind, data in events(env.t, "transfer.")] == [
        ("transfer.created", shown.id, "pending"),
        ("transfer.submitted", shown.id, "submitted"),
        ("transfer.completed", shown.id, "completed"),
    ]
    assert balance(env.node, "USDC", env.wallet) == 8 * 10**6


def test_a_cut_answer_then_an_unreachable_node_sends_an_offramp_once(env: Env) -> None:
    org = env.tenant.org
    body = offramp(env.wallet, env.bank, "1")
    env.chain_fwd.cut(when=SEND)
    with pytest.raises(UpstreamError):
        org.transfers.create(body, idempotency_key="off")
    env.chain_fwd.down()
    env.passes()
    with pytest.raises(IdempotencyInFlight):
        org.transfers.create(body, idempotency_key="off")
    env.chain_fwd.up()
    env.passes(5)
    replay = org.transfers.create(body, idempotency_key="off")
    assert org.transfers.get(replay.id).status == "completed"
    sent = transfers_from(env.node, "USDC", env.wallet)
    assert [int(log["data"], 16) for log in sent] == [10**6]  # one USDC, sent once
    assert len(env.fake.transfers) == 1


def test_a_provider_post_performed_then_answered_500_makes_one_provider_transfer(env: Env) -> None:
    org = env.tenant.org
    body = onramp(env.bank, address(), "3")
    env.fiat_fwd.fail_after(
        when=lambda method, path, _: method == "POST" and path == "/v0/transfers"
    )
    with pytest.raises(UpstreamError):
        org.transfers.create(body, idempotency_key="on")
    assert len(env.fake.transfers) == 1  # the provider did it
    with pytest.raises(IdempotencyInFlight):
        org.transfers.create(body, idempotency_key="on")
    env.passes()
    made = org.transfers.create(body, idempotency_key="on")
    assert made.replayed and made.deposit_instructions is not None
    env.passes(4)
    assert org.transfers.get(made.id).status == "completed"
    assert len(env.fake.transfers) == 1  # exactly one provider transfer
    keys = {r.headers["Idempotency-Key"] for r in env.fake.received("POST", "/transfers")}
    assert keys == {made.id}


def test_a_reverted_swap_fails_its_transfer_at_the_next_pass(env: Env) -> None:
    org, url = env.tenant.org, env.node["url"]
    rpc_call(url, "evm_setAutomine", [False])
    try:
        made = org.transfers.create(
            swap("deposit", env.wallet, env.wallet, "4"), idempotency_key="r"
        )
        drain(env.node, env.wallet)  # the swap will find no USDC
        rpc_call(url, "evm_mine", [])
    finally:
        rpc_call(url, "evm_setAutomine", [True])
    env.passes()
    failed = org.transfers.get(made.id)
    assert failed.status == "failed"
    assert failed.failure_reason is not None and "swap leg reverted" in failed.failure_reason
    announced = events(env.t, "transfer.")
    assert [kind for kind, _ in announced] == [
        "transfer.created",
        "transfer.submitted",
        "transfer.failed",
    ]
    assert announced[-1][1] == failed.to_json()


def test_a_reverted_offramp_send_fails_it_and_cancels_the_provider_transfer(env: Env) -> None:
    org, url = env.tenant.org, env.node["url"]
    rpc_call(url, "evm_setAutomine", [False])
    try:
        made = org.transfers.create(offramp(env.wallet, env.bank, "4"), idempotency_key="rs")
        drain(env.node, env.wallet)
        rpc_call(url, "evm_mine", [])
    finally:
        rpc_call(url, "evm_setAutomine", [True])
    env.passes()
    failed = org.transfers.get(made.id)
    assert failed.status == "failed" and "send leg reverted" in str(failed.failure_reason)
    (provider,) = env.fake.transfers.values()
    assert provider["state"] == "canceled"
    assert [kind for kind, _ in events(env.t, "transfer.")] == [
        "transfer.created",
        "transfer.failed",
    ]


def drain(node: dict[str, Any], owner: str) -> None:
    """Set `owner`'s USDC balance to 0 in the token's storage (`balanceOf`: slot 3)."""
    from eth_abi import encode
    from eth_utils.crypto import keccak

    slot = keccak(encode(["address", "uint256"], [owner, 3])).hex()
    rpc_call(
        node["url"], "anvil_setStorageAt", [node["addresses"]["USDC"], "0x" + slot, "0x" + "0" * 64]
    )
    assert balance(node, "USDC", owner) == 0


def test_a_nonce_hole_is_healed_and_the_transfer_behind_it_completes(env: Env, monkeypatch) -> None:
    """Transfer A's legs are stored; another process signs B above them and sends B;
    then A's broadcast is refused (nothing moved: A is abandoned). B waits behind A's
    nonces until the service fills them, with no new transfer of the user's."""
    first = env.t
    second = Treasury.open(
        env.url,
        master_key=MASTER_KEY,
        chains={CHAIN: {**env.node, "confirmations": 0}},
        clock=lambda: env.now[0],
    )
    chain = first.chain(CHAIN)
    org = env.tenant.org
    made_b = []
    send = chain.send_raw_transaction

    def refusing(raw: bytes) -> str:
        if not made_b:  # B is signed and sent meanwhile, by the other process
            other = second.for_organization(org.id)
            made_b.append(
                other.transfers.create(
                    swap("deposit", env.wallet, env.wallet, "2"), idempotency_key="b"
                )
            )
            raise UpstreamError("chain 31337 unreachable: ConnectError")  # nothing sent
        return send(raw)

    monkeypatch.setattr(chain, "send_raw_transaction", refusing)
    with pytest.raises(UpstreamError):
        org.transfers.create(swap("deposit", env.wallet, env.wallet, "3"), idempotency_key="a")
    monkeypatch.undo()
    assert org.transfers.list().count == 1  # A was abandoned: nothing of it went out
    b = made_b[0]
    assert org.transfers.get(b.id).status == "submitted"
    env.passes(3)  # seen, filled, settled
    assert org.transfers.get(b.id).status == "completed"
    assert org.transfers.list().count == 1
    second.close()


def test_the_zero_address_and_the_chains_contracts_are_refused_as_destinations(
    env: Env,
) -> None:
    org = env.tenant.org
    for target in ["0x" + "0" * 40, *env.node["addresses"].values()]:
        for body in (
            swap("deposit", env.wallet, target, "1"),
            onramp(env.bank, target, "1"),
        ):
            with pytest.raises(ValidationError) as refused:
                org.transfers.create(body, idempotency_key=address())
            assert refused.value.details["fields"][0]["field"] == "destination.to_address"
        with pytest.raises(ValidationError):
            org.recipients.create(address=target, label="Lost")
    assert org.transfers.list().count == 0 and org.recipients.list().data == []


@pytest.fixture(scope="module")
def slow_node() -> Iterator[dict[str, Any]]:
    """A node that mines a block every 2 s, as a real chain keeps transfers unmined."""
    require_anvil()
    with start_anvil(block_time=2) as anvil:
        yield deploy_contracts(anvil.url)


def test_concurrent_transfers_above_the_balance_are_refused_across_two_processes(
    slow_node: dict[str, Any], new_storage_url
) -> None:
    """16 deposits and off-ramps of 3 USDC at once from a wallet holding 10, through two
    API processes on one store: only what the balance allows is accepted; the others
    are 400 naming both amounts in USDC; every accepted one completes, none reverts."""
    from concurrent.futures import ThreadPoolExecutor

    node = slow_node

    def payout(chain_id: int, to: str, amount: str) -> str:
        return fund(node["url"], node, to, "USDC", amount)

    def arrived(chain_id: int, deposit_address: str, amount: str) -> bool:
        return balance(node, "USDC", deposit_address) >= int(float(amount) * 10**6)

    url = new_storage_url("race.db")
    spec = {"url": node["url"], "addresses": node["addresses"], "confirmations": 0}
    with fake_provider(payout=payout, deposit_arrived=arrived) as fake:
        processes = [
            Treasury.open(
                url,
                master_key=MASTER_KEY,
                chains={CHAIN: spec},
                fiat=HttpFiat(fake.url, api_key=fake.api_key),
            )
            for _ in range(2)
        ]
        tenant = make_tenant(processes[0])
        onboard(processes[0], tenant.org.id, fake)
        wallet = tenant.org.wallets.create(label="Ops").address
        fund(node["url"], node, wallet, "ETH", "1")
        fund(node["url"], node, wallet, "USDC", "10")
        bank = tenant.org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
        handles = [p.for_organization(tenant.org.id) for p in processes]

        def attempt(i: int) -> Any:
            body = swap("deposit", wallet, wallet, "3") if i % 2 else offramp(wallet, bank, "3")
            try:
                return handles[i % 2].transfers.create(body, idempotency_key=f"race-{i}")
            except ValidationError as refused:
                return refused

        with ThreadPoolExecutor(16) as pool:
            outcomes = list(pool.map(attempt, range(16)))
        accepted = [o for o in outcomes if not isinstance(o, ValidationError)]
        refused = [o for o in outcomes if isinstance(o, ValidationError)]
        assert 2 <= len(accepted) <= 3  # 3 x 3 <= 10 (2 if a block landed mid-check)
        for error in refused:
            message = error.details["fields"][0]["message"]
            assert "insufficient balance: available" in message and "USDC, requested 3" in message
        import time

        for _ in range(40):  # blocks every 2 s; the provider moves one state a pass
            processes[0].run_once()
            if all(
                tenant.org.transfers.get(t.id).status in ("completed", "failed") for t in accepted
            ):
                break
            time.sleep(1)
        assert [tenant.org.transfers.get(t.id).status for t in accepted] == ["completed"] * len(
            accepted
        )
        moved = sum(int(log["data"], 16) for log in transfers_from(node, "USDC", wallet))
        assert moved == 3 * 10**6 * len(accepted)
        assert balance(node, "USDC", wallet) == 10**7 - moved
        for p in processes:
            p.close()
