"""Fiat transfers through the `http` provider plugin, against the fake provider over real
HTTP: both pairings end to end, the in-flight 409, and the provider's failures."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.backends.chain.devnet import DevnetChain
from treasury.backends.fiat.http import HttpFiat
from treasury.evm.abi import BALANCE_OF
from treasury.http import create_app
from treasury.testing.fake_provider import FakeProvider, fake_provider, onboard
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, address, offramp, onramp

CHAIN = 31337


@dataclass
class Env:
    t: Treasury
    fake: FakeProvider
    chain: DevnetChain
    api: httpx.Client
    wallet: str
    bank: str
    now: list[datetime]

    def usdc(self, owner: str) -> int:
        data = self.chain.call(self.chain.addresses["USDC"], BALANCE_OF.encode(owner))
        return int(BALANCE_OF.decode(data)[0])

    def post(self, body: dict[str, Any], key: str) -> httpx.Response:
        return self.api.post("/v1/transfers", json=body, headers={"Idempotency-Key": key})

    def count(self) -> int:
        with self.t.storage.read() as tx:
            return int(tx.one("SELECT COUNT(*) AS n FROM transfers")["n"])


@pytest.fixture(scope="module")
def chain() -> DevnetChain:
    return DevnetChain()


@pytest.fixture
def env(chain: DevnetChain, new_storage_url) -> Iterator[Env]:
    def payout(chain_id: int, to: str, amount: str) -> str:
        return chain.faucet(to, "USDC", amount)  # the provider pays out on-chain

    def arrived(chain_id: int, deposit_address: str, amount: str) -> bool:
        data = chain.call(chain.addresses["USDC"], BALANCE_OF.encode(deposit_address))
        return int(BALANCE_OF.decode(data)[0]) >= int(float(amount) * 10**6)

    now = [datetime.now(UTC)]
    with fake_provider(payout=payout, deposit_arrived=arrived) as fake:
        fiat = HttpFiat(fake.url, api_key=fake.api_key, timeout=httpx.Timeout(2.0))
        t = Treasury.open(
            new_storage_url("t.db"),
            master_key=MASTER_KEY,
            fiat=fiat,
            chains={CHAIN: chain},
            clock=lambda: now[0],
        )
        tenant = make_tenant(t)
        onboard(t, tenant.org.id, fake)
        wallet = tenant.org.wallets.create(label="Ops").address
        chain.faucet(wallet, "ETH", "1")
        chain.faucet(wallet, "USDC", "500")
        bank = tenant.org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
        with (
            serve(create_app(t)) as url,
            httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}, timeout=60) as api,
        ):
            yield Env(t, fake, chain, api, wallet, bank, now)
        t.close()


def statuses(env: Env, transfer_id: str, passes: int) -> list[str]:
    seen = []
    for _ in range(passes):
        summary = env.t.run_once()
        assert not summary.errors, summary.errors
        seen.append(env.api.get(f"/v1/transfers/{transfer_id}").json()["status"])
    return seen


def test_onramp_end_to_end(env):
    receiver = address().lower()
    r = env.post(onramp(env.bank, receiver, "80", developer_fee="0.5"), "on-1")
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["status"] == "pending" and len(body["depositInstructions"]["routingNumber"]) == 9
    assert statuses(env, body["id"], 4)[-1] == "completed"
    done = env.api.get(f"/v1/transfers/{body['id']}").json()
    assert done["transactionHash"] and done["to"]["amount"] == "79.5"
    assert env.usdc(receiver) == 79_500_000
    sent = [r for r in env.fake.requests if r.method == "POST" and r.path.endswith("/transfers")]
    assert sent[-1].headers["Idempotency-Key"] == body["id"]  # our id is the provider's key


def test_offramp_end_to_end(env):
    before = env.usdc(env.wallet)
    r = env.post(offramp(env.wallet, env.bank, "60"), "off-1")
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["status"] == "pending" and body["transactionHash"]
    assert env.usdc(env.wallet) == before - 60_000_000
    assert statuses(env, body["id"], 4)[-1] == "completed"


def test_a_request_in_flight_is_409_then_replays(env):
    env.fake.slow(1.5, method="POST", path="/transfers")
    first: list[httpx.Response] = []
    body = onramp(env.bank, address(), "5")
    thread = threading.Thread(target=lambda: first.append(env.post(body, "slow")))
    thread.start()
    deadline = datetime.now(UTC) + timedelta(seconds=10)
    while not any(r.path.endswith("/transfers") for r in env.fake.requests):
        assert datetime.now(UTC) < deadline
    busy = env.post(body, "slow")
    assert busy.status_code == 409 and busy.json()["details"]["code"] == "idempotency_in_flight"
    thread.join(30)
    assert first[0].status_code == 201
    replay = env.post(body, "slow")
    assert replay.status_code == 201 and replay.json() == first[0].json()
    assert replay.headers["Idempotent-Replayed"] == "true"


def test_a_provider_5xx_is_ambiguous_the_key_stays_taken_and_one_transfer_is_made(env):
    """A 5xx may come after the provider performed the POST (a gateway, a crash after
    the commit): the claim is kept, the transfer shows as pending, and the job's retry
    with the same provider Idempotency-Key (the transfer's id) finishes it once."""
    env.fake.fail(status=503, method="POST", path="/transfers")
    body = onramp(env.bank, address(), "5")
    r = env.post(body, "five-hundred")
    assert r.status_code == 502
    assert env.post(body, "five-hundred").status_code == 409  # the key is not freed
    listed = env.api.get("/v1/transfers").json()["data"]
    assert [t["status"] for t in listed if t["from"]["amount"] == "5"] == ["pending"]
    env.now[0] += timedelta(seconds=91)
    summary = env.t.run_once()
    assert summary["transfers_finished"] == 1 and not summary.errors
    replay = env.post(body, "five-hundred")
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    keys = {r.headers["Idempotency-Key"] for r in env.fake.received("POST", "/transfers")}
    assert keys == {replay.json()["id"]}  # every attempt carried the transfer's id


def test_a_timeout_after_the_provider_received_is_resolved_by_the_job(env):
    body = onramp(env.bank, address(), "7")
    env.fake.stall(4, method="POST", path="/transfers")
    r = env.post(body, "stalled")
    assert r.status_code == 502  # the provider may have it: the claim stays in flight
    assert env.post(body, "stalled").status_code == 409
    created = [t for t in env.fake.transfers.values() if t["amount"] == "7"]
    assert len(created) == 1  # it did arrive
    env.now[0] += timedelta(seconds=91)
    summary = env.t.run_once()
    assert summary["transfers_finished"] == 1 and not summary.errors
    replay = env.post(body, "stalled")
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    assert len([t for t in env.fake.transfers.values() if t["amount"] == "7"]) == 1  # once
