"""`treasury.client.TreasuryClient` against the live server on loopback: every resource
group, errors as the library's own classes, automatic Idempotency-Keys, the feed
iterator, and the retries (429 and 409 in flight from the real server; a connection that
fails once through an httpx transport, which a real network cannot do on demand)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.client import TreasuryClient
from treasury.errors import (
    AuthenticationError,
    IdempotencyInFlight,
    NotFound,
    RateLimited,
    ValidationError,
)
from treasury.http import create_app
from treasury.testing.server import serve
from treasury.transfers.models import Transfer
from treasury.wallets import Wallet

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, address, onramp, swap

CHAIN = 31337


@pytest.fixture(scope="module")
def live(module_storage_url) -> Iterator[dict[str, Any]]:
    t = Treasury.open(module_storage_url, master_key=MASTER_KEY, allow_private_webhook_urls=True)
    tenant = make_tenant(t)
    with serve(create_app(t)) as url, TreasuryClient(url, api_key=tenant.secret) as c:
        yield {"t": t, "url": url, "c": c, "tenant": tenant}
    t.close()


def test_every_resource_group_through_the_client(live):
    c, chain = live["c"], live["t"].chain(CHAIN)
    wallet = c.wallets.create(label="Ops")
    assert isinstance(wallet, Wallet) and wallet.label == "Ops"
    assert c.wallets.get(wallet.address.upper().replace("0X", "0x")).id == wallet.id
    assert c.wallets.update(wallet.address, label="Treasury").label == "Treasury"
    assert wallet.address in [w.address for w in c.wallets.list().data]
    tracked = c.wallets.track(address=address(), label="Cold")
    assert tracked.wallet.label == "Cold"
    recipient = c.recipients.create(address=address(), label="Supplier")
    assert c.recipients.update(recipient.id, label="Supplier Inc").label == "Supplier Inc"
    assert c.recipients.delete(recipient.id).deleted
    bank = c.bank_accounts.create(BANK_ACCOUNT)
    assert bank.account_number_last4 == BANK_ACCOUNT["account"]["account_number"][-4:]
    assert c.bank_accounts.list().count >= 1
    hook = c.webhooks.create(url="http://127.0.0.1:1/hook", events=["transaction.confirmed"])
    assert hook.secret.startswith("whsec_") and c.webhooks.deliveries(hook.id).data == []
    assert c.webhooks.delete(hook.id).deleted
    c.test_helpers.faucet(CHAIN, address=wallet.address, token="USDC", amount="50")
    chain.faucet(wallet.address, "ETH", "1")
    balances = {b.symbol: b.raw for b in c.balances.get(CHAIN, wallet.address).data}
    assert balances["USDC"] == "50000000"
    assert c.yields.estimate(CHAIN, wallet.address).earning == "0"
    prepared = c.swaps.prepare_deposit(CHAIN, token="USDC", amount="1", **{"from": wallet.address})
    assert [step.type for step in prepared.steps] == ["approval", "swap"]
    deposit = c.transfers.create(swap("deposit", wallet.address, wallet.address, "5"))
    assert isinstance(deposit, Transfer) and c.transfers.get(deposit.id).id == deposit.id
    ramp = c.transfers.create(onramp(bank.provider_external_account_id, wallet.address, "20"))
    assert ramp.status == "pending"
    assert c.virtual_account.get().organization_id == live["tenant"].org.id
    assert c.virtual_wallet.get().address.startswith("0x")
    assert c.transactions.get(CHAIN, deposit.transaction_hash).hash == deposit.transaction_hash
    legs = c.transactions.list(CHAIN, wallet=wallet.address, limit=1)
    assert legs.data[0].hash == deposit.transaction_hash and legs.next_cursor  # the approval next
    assert c.transactions.list(CHAIN, cursor=legs.next_cursor, limit=5).count >= 1
    assert c.yield_artifacts.list().data == []
    assert c.yields.claims(wallet.address).data == []
    assert c.wallets.delete(tracked.wallet.address).deleted


def test_errors_arrive_as_the_librarys_classes_with_details(live):
    c = live["c"]
    with pytest.raises(ValidationError) as invalid:
        c.recipients.create(address="not-an-address", label="")
    fields = {f["field"] for f in invalid.value.details["fields"]}
    assert {"address", "label"} <= fields
    with pytest.raises(NotFound):
        c.wallets.get("0x" + "0" * 39 + "1")
    with TreasuryClient(live["url"], api_key="trk_nope") as stranger:
        with pytest.raises(AuthenticationError):
            stranger.wallets.list()
        assert stranger.yield_artifacts.list().count == 0  # public: no key needed


def test_posts_get_keys_automatically_and_an_explicit_key_replays(live):
    c = live["c"]
    first, second = c.wallets.create(label="Auto"), c.wallets.create(label="Auto")
    assert first.id != second.id  # two plain creates: two wallets
    once = c.wallets.create(label="Keyed", idempotency_key="one-key")
    again = c.wallets.create(label="Keyed", idempotency_key="one-key")
    assert again.id == once.id and again.replayed and not once.replayed


def test_the_feed_iterator_walks_every_page(live):
    c = live["c"]
    wallet = c.wallets.create(label="Feed")
    live["t"].chain(CHAIN).faucet(wallet.address, "USDC", "100")
    live["t"].chain(CHAIN).faucet(wallet.address, "ETH", "1")
    for _ in range(5):
        c.transfers.create(swap("deposit", wallet.address, wallet.address, "1"))
    every = list(c.iterate_transfers(limit=2))
    assert [t.id for t in every] == [t.id for t in c.transfers.list(limit=200).data]
    assert len({t.id for t in every}) == len(every) >= 5


def test_429_waits_for_retry_after_and_then_succeeds(new_storage_url, monkeypatch):
    """A real server with a limit of 2 requests a second per key: the third is retried
    after the server's Retry-After (each wait recorded) and succeeds."""
    t = Treasury.open(new_storage_url("rl.db"), master_key=MASTER_KEY, rate_limit="2/1 second")
    tenant = make_tenant(t)
    slept: list[float] = []
    sleep = time.sleep  # the real one: the server's window must really pass

    def recorded(seconds: float) -> None:
        slept.append(seconds)
        sleep(seconds)

    monkeypatch.setattr(time, "sleep", recorded)
    with serve(create_app(t)) as url, TreasuryClient(url, api_key=tenant.secret) as c:
        for _ in range(3):
            c.wallets.list()
        assert slept and slept[0] >= 1
        with TreasuryClient(url, api_key=tenant.secret, max_retries=0) as impatient:
            with pytest.raises(RateLimited) as limited:  # no retries: the 429 is raised
                for _ in range(3):
                    impatient.wallets.list()
            assert limited.value.retry_after >= 1
    t.close()


def test_409_in_flight_is_retried_until_the_replay(live, monkeypatch):
    """A claim in flight (a real 409 from the server) is retried; once the first request
    is done, the retry gets its outcome."""
    c = live["c"]
    in_flight = {"answers": 0}
    real = httpx.Client.send

    def send(self: httpx.Client, request: httpx.Request, **kw: Any) -> httpx.Response:
        if request.headers.get("Idempotency-Key") == "busy" and in_flight["answers"] < 2:
            in_flight["answers"] += 1  # as the server answers while the first is running
            return httpx.Response(
                409, json={"error": "in flight", "details": {"code": "idempotency_in_flight"}}
            )
        return real(self, request, **kw)

    monkeypatch.setattr(httpx.Client, "send", send)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    wallet = c.wallets.create(label="Busy", idempotency_key="busy")
    assert wallet.label == "Busy" and in_flight["answers"] == 2
    with TreasuryClient(live["url"], api_key=live["tenant"].secret, max_retries=0) as once:
        in_flight["answers"] = 0
        with pytest.raises(IdempotencyInFlight):
            once.wallets.create(label="Busy", idempotency_key="busy")


def test_a_connection_that_fails_is_retried_with_the_same_key(live):
    """Through an httpx transport (a real network cannot refuse once on demand): the
    first attempt cannot connect, the retry carries the same Idempotency-Key."""
    keys: list[str | None] = []
    inner = httpx.HTTPTransport()

    class Flaky(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            keys.append(request.headers.get("Idempotency-Key"))
            if len(keys) == 1:
                raise httpx.ConnectError("refused", request=request)
            return inner.handle_request(request)

    http = httpx.Client(transport=Flaky())
    with TreasuryClient(
        live["url"], api_key=live["tenant"].secret, http_client=http, backoff=0
    ) as c:
        wallet = c.wallets.create(label="Flaky")
    assert wallet.label == "Flaky" and len(keys) == 2 and keys[0] == keys[1] is not None
    http.close()


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_the_base_url_works_with_or_without_the_v1_that_serve_prints(live, suffix):
    with TreasuryClient(live["url"] + suffix, api_key=live["tenant"].secret) as c:
        listed = c.wallets.list()
        assert [w.id for w in listed] == [w.id for w in listed.data]  # a list iterates
        assert repr(c) == f"<TreasuryClient {live['url']}/v1>"
