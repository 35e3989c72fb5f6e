"""The http fiat plugin against the fake provider, over real HTTP on loopback: the
conformance suite, then each failure mode at the boundary and the API key's secrecy."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace

import httpx
import pytest

from treasury import Treasury
from treasury._infra.plugins import backend_class, resolve
from treasury.backends.fiat.base import FiatProvider, OffRamp, OnRamp, ProviderTransfer
from treasury.backends.fiat.http import API_KEY_ENV, HttpFiat
from treasury.errors import UpstreamError
from treasury.testing.fake_provider import FakeProvider, fake_provider, onboard
from treasury.testing.fiat import ACCOUNT, OTHER_ACCOUNT, FiatSuite, Settle, new_key

from .conftest import MASTER_KEY
from .helpers import BANK_ACCOUNT, address, onramp

TO = "0x" + "ab" * 20


@pytest.fixture(scope="module")
def arrived() -> set[str]:
    """Deposit addresses whose off-ramp USDC has arrived (the suite's `settle` adds)."""
    return set()


@pytest.fixture(scope="module")
def shared(arrived: set[str]) -> Iterator[FakeProvider]:
    with fake_provider(deposit_arrived=lambda chain_id, address, amount: address in arrived) as f:
        yield f


class TestHttpFiat(FiatSuite):
    @pytest.fixture
    def fiat(self, shared: FakeProvider) -> Iterator[HttpFiat]:
        provider = HttpFiat(shared.url, api_key=shared.api_key)
        yield provider
        provider.close()

    @pytest.fixture
    def approve(self, shared: FakeProvider) -> Callable[[str], None]:
        return shared.approve

    @pytest.fixture
    def settle(self, arrived: set[str]) -> Settle:
        def send(transfer: ProviderTransfer, request: OffRamp) -> None:
            assert transfer.deposit_address is not None
            arrived.add(transfer.deposit_address)

        return send


# -- one fake and one client per test, for failures --------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with fake_provider() as f:
        yield f


@pytest.fixture
def fiat(fake: FakeProvider) -> Iterator[HttpFiat]:
    """A client that gives up reading after 0.5 s (the fake stalls for longer)."""
    with httpx.Client(timeout=httpx.Timeout(0.5, connect=5.0)) as client:
        yield HttpFiat(fake.url, api_key=fake.api_key, client=client)


def approved(fiat: HttpFiat, fake: FakeProvider, name: str = "Acme Inc") -> str:
    """A customer onboarded through its KYB link and approved (the sandbox's simulation)."""
    started = fiat.start_onboarding(name, idempotency_key=new_key(), email="ops@example.com")
    fake.approve(started.customer_id)
    return started.customer_id


@pytest.fixture
def customer(fiat: HttpFiat, fake: FakeProvider) -> str:
    return approved(fiat, fake)


@pytest.fixture
def account(fiat: HttpFiat, customer: str) -> str:
    return fiat.register_external_account(customer, ACCOUNT, idempotency_key=new_key())


def ramp(account: str, chain_id: int = 31337) -> OnRamp:
    return OnRamp("100", "1", account, chain_id, TO)


def test_a_5xx_on_a_post_is_ambiguous_and_a_retry_with_the_key_is_safe(
    fiat: HttpFiat, fake: FakeProvider, customer: str, account: str
) -> None:
    fake.fail(status=503, path="/transfers")
    key = new_key()
    with pytest.raises(UpstreamError) as caught:
        fiat.create_transfer(customer, ramp(account), idempotency_key=key)
    assert caught.value.ambiguous and "503" in str(caught.value)  # it may have been done
    assert fake.transfers == {}
    made = fiat.create_transfer(customer, ramp(account), idempotency_key=key)  # a safe retry
    assert list(fake.transfers) == [made.id]


def test_a_refusal_carries_the_providers_message(
    fiat: HttpFiat, fake: FakeProvider, customer: str
) -> None:
    fake.refuse("Customer has not accepted the Terms of Service", code="has_not_accepted_tos")
    with pytest.raises(UpstreamError) as caught:
        fiat.register_external_account(customer, ACCOUNT, idempotency_key=new_key())
    assert not caught.value.ambiguous
    assert "Customer has not accepted the Terms of Service" in str(caught.value)
    assert "has_not_accepted_tos" in str(caught.value) and fake.accounts == {}


def test_an_invalid_request_is_refused_with_the_field(fiat: HttpFiat, customer: str) -> None:
    with pytest.raises(UpstreamError, match=r"account\.routing_number"):
        bad = replace(OTHER_ACCOUNT, routing_number="12")
        fiat.register_external_account(customer, bad, idempotency_key=new_key())


def test_a_timeout_after_arrival_is_ambiguous_and_a_retry_finds_the_transfer(
    fiat: HttpFiat, fake: FakeProvider, customer: str, account: str
) -> None:
    fake.stall(3.0, method="POST", path="/transfers")
    key = new_key()
    with pytest.raises(UpstreamError) as caught:
        fiat.create_transfer(customer, ramp(account), idempotency_key=key)
    assert caught.value.ambiguous
    assert len(fake.transfers) == 1  # the provider did it
    again = fiat.create_transfer(customer, ramp(account), idempotency_key=key)
    assert list(fake.transfers) == [again.id]  # the same one, no duplicate


def test_a_slow_answer_within_the_timeout_succeeds(fake: FakeProvider) -> None:
    fake.slow(0.3, path="/customers")
    with httpx.Client(timeout=httpx.Timeout(5.0, connect=5.0)) as client:
        fiat = HttpFiat(fake.url, api_key=fake.api_key, client=client)
        customer = fiat.create_customer("Slow Inc", idempotency_key=new_key())
    assert list(fake.customers) == [customer]


def test_a_refused_connection_is_definite() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fiat = HttpFiat(f"http://127.0.0.1:{port}/v0", api_key="sk-nothing-listens")
    with pytest.raises(UpstreamError) as caught:
        fiat.create_customer("Acme", idempotency_key=new_key())
    assert not caught.value.ambiguous and "unreachable" in str(caught.value)


def test_malformed_json_is_an_upstream_error(
    fiat: HttpFiat, fake: FakeProvider, customer: str, account: str
) -> None:
    made = fiat.create_transfer(customer, ramp(account), idempotency_key=new_key())
    fake.garble(method="GET")
    with pytest.raises(UpstreamError) as read:
        fiat.transfers([made.id])
    assert not read.value.ambiguous  # a read changed nothing
    fake.garble(method="POST")
    with pytest.raises(UpstreamError) as created:
        fiat.create_transfer(customer, ramp(account), idempotency_key=new_key())
    assert created.value.ambiguous  # the provider did it; only its answer is lost
    assert len(fake.transfers) == 2


def test_an_unknown_chain_is_refused_before_sending(
    fiat: HttpFiat, fake: FakeProvider, customer: str, account: str
) -> None:
    with pytest.raises(UpstreamError, match="no payment rail for chain 999"):
        fiat.create_transfer(customer, ramp(account, 999), idempotency_key=new_key())
    assert fake.received("POST", "/transfers") == []


def test_chains_are_named_by_their_payment_rail(
    fiat: HttpFiat, fake: FakeProvider, customer: str, account: str
) -> None:
    fiat.create_transfer(customer, ramp(account, 1), idempotency_key=new_key())
    off = OffRamp("5", "0", account, 31337, TO)
    fiat.create_transfer(customer, off, idempotency_key=new_key())
    on_body, off_body = (r.body for r in fake.received("POST", "/transfers"))
    assert on_body["source"] == {"payment_rail": "ach_push", "currency": "usd"}
    assert on_body["destination"] == {
        "payment_rail": "ethereum",
        "currency": "usdc",
        "to_address": TO,
    }
    assert off_body["source"] == {
        "payment_rail": "ethereum",
        "currency": "usdc",
        "from_address": TO,
    }
    assert off_body["destination"] == {
        "payment_rail": "ach",
        "currency": "usd",
        "external_account_id": account,
    }


def test_many_states_are_read_over_one_kept_alive_connection(
    fiat: HttpFiat, fake: FakeProvider, customer: str, account: str
) -> None:
    made = [
        fiat.create_transfer(customer, ramp(account), idempotency_key=new_key()) for _ in "abcd"
    ]
    before = len(fake.requests)
    views = fiat.transfers([m.id for m in reversed(made)])
    assert [v.id for v in views] == [m.id for m in reversed(made)]
    reads = fake.requests[before:]
    assert len(reads) == 4 and {r.method for r in reads} == {"GET"}
    assert len({r.client_port for r in reads}) == 1


def test_a_virtual_accounts_wallet_balance_is_read_from_the_provider(
    fiat: HttpFiat, fake: FakeProvider, customer: str
) -> None:
    account = fiat.create_virtual_account(customer, idempotency_key=new_key())
    assert fiat.wallet_balance(customer, account.wallet_id) == "0"
    fake.deposit_to_virtual_account(account.id, "12.50")
    assert fiat.wallet_balance(customer, account.wallet_id) == "12.50"


def test_the_strict_provider_refuses_another_body_under_a_used_key() -> None:
    """The real provider answers ``not_truly_idempotent``; the plugin surfaces it."""
    with fake_provider(strict_idempotency=True) as strict:
        fiat = HttpFiat(strict.url, api_key=strict.api_key)
        customer = approved(fiat, strict)
        key = new_key()
        first = fiat.register_external_account(customer, ACCOUNT, idempotency_key=key)
        assert fiat.register_external_account(customer, ACCOUNT, idempotency_key=key) == first
        with pytest.raises(UpstreamError, match="not_truly_idempotent"):
            fiat.register_external_account(customer, OTHER_ACCOUNT, idempotency_key=key)


# -- the API key --------------------------------------------------------------------------


def test_the_key_is_sent_as_api_key_and_every_post_carries_an_idempotency_key(
    fiat: HttpFiat, fake: FakeProvider, customer: str, account: str
) -> None:
    made = fiat.create_transfer(customer, ramp(account), idempotency_key="k-1")
    fiat.transfers([made.id])
    fiat.create_virtual_account(customer, idempotency_key="k-2")
    assert all(r.headers.get("Api-Key") == fake.api_key for r in fake.requests)
    posts, gets = fake.received("POST"), fake.received("GET")
    assert len(posts) == 5 and all(r.headers.get("Idempotency-Key") for r in posts)
    assert gets and not any("Idempotency-Key" in r.headers for r in gets)
    assert [r.path for r in posts[:2]] == ["/kyc_links", f"/customers/{customer}/external_accounts"]
    assert [r.headers["Idempotency-Key"] for r in posts[2:]] == [
        "k-1",
        "k-2:wallet",
        "k-2:virtual-account",
    ]
    assert not any(fake.api_key in r.path for r in fake.requests)


def test_a_wrong_key_is_refused_without_being_shown(fake: FakeProvider) -> None:
    wrong = "sk-wrong-" + "x" * 24
    fiat = HttpFiat(fake.url, api_key=wrong)
    with pytest.raises(UpstreamError) as caught:
        fiat.create_customer("Acme", idempotency_key=new_key())
    assert "401" in str(caught.value) and wrong not in str(caught.value)


def test_the_key_never_shows(
    fake: FakeProvider, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(API_KEY_ENV, fake.api_key)
    fiat = resolve("fiat", fake.url, FiatProvider)  # by URL, the key from the environment
    assert isinstance(fiat, HttpFiat)
    texts = [repr(fiat), str(vars(fiat))]
    customer = approved(fiat, fake)
    for arrange in (
        lambda: fake.fail(status=500),
        lambda: fake.refuse(f"echoing {fake.api_key}"),
        lambda: fake.garble(),
    ):
        arrange()
        with pytest.raises(UpstreamError) as caught:
            fiat.register_external_account(customer, ACCOUNT, idempotency_key=new_key())
        texts += [str(caught.value), repr(caught.value)]
    texts.append(caplog.text)
    assert caplog.records  # something was logged, at DEBUG
    assert not [t for t in texts if fake.api_key in t]


def test_the_key_comes_from_the_environment_or_the_constructor(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    with pytest.raises(ValueError, match=API_KEY_ENV):
        HttpFiat.from_url(fake.url)
    with pytest.raises(ValueError, match="not in its URL"):
        HttpFiat("https://user:secret@example.com/v0", api_key="k")
    assert HttpFiat(fake.url, api_key=fake.api_key).create_customer("A", idempotency_key="x")


def test_http_and_https_urls_select_the_plugin() -> None:
    assert backend_class("fiat", "https://api.bridge.xyz/v0") is HttpFiat
    assert backend_class("fiat", "http://127.0.0.1:9/v0") is HttpFiat


def test_a_treasury_runs_its_onramps_through_the_plugin(
    fake: FakeProvider, new_storage_url: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chosen by URL, the key from the environment: a transfer goes to completed."""
    monkeypatch.setenv(API_KEY_ENV, fake.api_key)
    t = Treasury.open(new_storage_url("t.db"), master_key=MASTER_KEY, fiat=fake.url)
    try:
        org = t.admin.create_organization("Acme")
        onboard(t, org.id, fake)
        acme = t.for_api_key(t.admin.create_api_key(org.id, user_id="u").secret)
        bank = acme.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
        moved = acme.transfers.create(onramp(bank, address(), "25"), idempotency_key="t")
        assert moved.status == "pending" and len(fake.transfers) == 1
        for _ in range(3):
            t.run_once()
        (done,) = acme.transfers.list().data
        assert done.status == "completed" and done.transaction_hash
        assert acme.virtual_account.get().usdb_balance in ("0", "0.0")
    finally:
        t.close()
