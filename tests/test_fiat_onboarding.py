"""The fiat provider's rules beyond the happy path, through the `http` plugin against the
faithful fake over real HTTP: onboarding (409 with the KYB link until approved), every
exception state, owner names, the 24 h idempotency window, and a pass's request count."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from treasury import Treasury
from treasury.backends.chain.devnet import DevnetChain
from treasury.backends.fiat.base import FAILED_STATES, OnRamp
from treasury.backends.fiat.http import HttpFiat
from treasury.errors import OnboardingIncomplete, UpstreamError, ValidationError
from treasury.evm.abi import BALANCE_OF
from treasury.http import create_app
from treasury.testing.fake_provider import FakeProvider, fake_provider, onboard
from treasury.testing.fiat import ACCOUNT, new_key
from treasury.testing.server import serve

from .conftest import MASTER_KEY, Tenant, make_tenant
from .helpers import BANK_ACCOUNT, address, offramp, onramp

CHAIN = 31337
NOT_COMPLETE = "fiat onboarding is not complete"


@dataclass
class Env:
    t: Treasury
    fake: FakeProvider
    chain: DevnetChain
    tenant: Tenant
    api: httpx.Client
    clock: list[datetime]  # the fake provider's

    def passes(self, n: int = 1) -> None:
        for _ in range(n):
            summary = self.t.run_once()
            assert not summary.errors, summary.errors

    def status(self, transfer_id: str) -> dict:
        return dict(self.api.get(f"/v1/transfers/{transfer_id}").json())


@pytest.fixture(scope="module")
def chain() -> DevnetChain:
    return DevnetChain()


@pytest.fixture
def env(chain: DevnetChain, new_storage_url) -> Iterator[Env]:
    def arrived(chain_id: int, deposit_address: str, amount: str) -> bool:
        data = chain.call(chain.addresses["USDC"], BALANCE_OF.encode(deposit_address))
        return int(BALANCE_OF.decode(data)[0]) >= int(float(amount) * 10**6)

    clock = [datetime.now(UTC)]
    with fake_provider(
        payout=lambda chain_id, to, amount: chain.faucet(to, "USDC", amount),
        deposit_arrived=arrived,
        clock=lambda: clock[0],
    ) as fake:
        fiat = HttpFiat(fake.url, api_key=fake.api_key, timeout=httpx.Timeout(5.0))
        t = Treasury.open(
            new_storage_url("t.db"), master_key=MASTER_KEY, fiat=fiat, chains={CHAIN: chain}
        )
        tenant = make_tenant(t)
        with (
            serve(create_app(t)) as url,
            httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}, timeout=60) as api,
        ):
            yield Env(t, fake, chain, tenant, api, clock)
        t.close()


def approved(env: Env) -> str:
    """Onboard and approve the organization; a registered bank account's uuid."""
    onboard(env.t, env.tenant.org.id, env.fake)
    return env.tenant.org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id


def test_fiat_operations_answer_409_with_the_link_until_approved_then_complete(env: Env) -> None:
    org, admin = env.tenant.org, env.t.admin
    assert admin.onboarding(org.id).model_dump() == {"status": "not_started", "url": None}
    # not started, and no contact email to start it with: 409, no link yet, and the next step
    r = env.api.post("/v1/bank-accounts", json=BANK_ACCOUNT, headers={"Idempotency-Key": "b"})
    assert r.status_code == 409, r.text
    details = r.json()["details"]
    assert r.json()["error"] == NOT_COMPLETE and details["status"] == "not_started"
    assert details["url"] is None
    assert f"treasury orgs onboard {org.id} --email" in details["next"]
    assert "start_onboarding(" in details["next"] and "email=" in details["next"]
    # asked to start without an email: a 400 naming `email`, never a silent not_started
    with pytest.raises(ValidationError) as refused_start:
        admin.start_onboarding(org.id)
    assert refused_start.value.status == 400
    assert [f["field"] for f in refused_start.value.details["fields"]] == ["email"]
    assert not env.fake.kyc_links
    started = admin.start_onboarding(org.id, email="ops@acme.example")
    assert started.status == "not_started" and (started.url or "").startswith("https://")
    assert admin.start_onboarding(org.id).model_dump() == started.model_dump()  # once
    assert len(env.fake.kyc_links) == 1
    next_step = f"complete the provider's KYB at {started.url}"
    expected = {
        "error": NOT_COMPLETE,
        "details": {
            **started.model_dump(),
            "next": f"{next_step}; fiat operations work once it is approved",
        },
    }
    wallet = org.wallets.create(label="Ops").address
    refused = [
        env.api.post("/v1/bank-accounts", json=BANK_ACCOUNT, headers={"Idempotency-Key": "b"}),
        env.api.get("/v1/virtual-account"),
        env.api.post(
            "/v1/transfers",
            json=onramp(new_key(), address()),
            headers={"Idempotency-Key": "on"},
        ),
        env.api.post(
            "/v1/transfers",
            json=offramp(wallet, new_key(), "5"),
            headers={"Idempotency-Key": "off"},
        ),
    ]
    assert [(r.status_code, r.json()) for r in refused] == [(409, expected)] * 4
    with pytest.raises(OnboardingIncomplete) as caught:
        org.virtual_account.get()
    assert caught.value.details == expected["details"]
    assert not env.fake.accounts and not env.fake.transfers and not env.fake.wallets

    customer = next(iter(env.fake.customers))
    env.fake.approve(customer)  # as the provider's sandbox simulates
    assert admin.onboarding(org.id).status == "approved"
    # the same keys run afresh: a 409 of onboarding is never kept under a key
    r = env.api.post("/v1/bank-accounts", json=BANK_ACCOUNT, headers={"Idempotency-Key": "b"})
    assert r.status_code == 201, r.text
    bank = r.json()["providerExternalAccountId"]
    receiver = address().lower()
    on = env.api.post(
        "/v1/transfers", json=onramp(bank, receiver, "30"), headers={"Idempotency-Key": "on"}
    )
    env.chain.faucet(wallet, "ETH", "1")
    env.chain.faucet(wallet, "USDC", "10")
    off = env.api.post(
        "/v1/transfers", json=offramp(wallet, bank, "5"), headers={"Idempotency-Key": "off"}
    )
    assert (on.status_code, off.status_code) == (201, 201), (on.text, off.text)
    env.passes(5)
    assert env.status(on.json()["id"])["status"] == "completed"
    assert env.status(off.json()["id"])["status"] == "completed"
    account = env.api.get("/v1/virtual-account")
    assert account.status_code == 200 and account.json()["providerVirtualAccountId"]


@pytest.mark.parametrize("state", sorted(FAILED_STATES))
def test_each_exception_state_fails_the_transfer_naming_it(env: Env, state: str) -> None:
    bank = approved(env)
    made = env.tenant.org.transfers.create(onramp(bank, address(), "12"), idempotency_key="t")
    env.passes()
    (provider_id,) = env.fake.transfers
    env.fake.set_state(provider_id, state)
    env.passes()
    shown = env.status(made.id)
    assert shown["status"] == "failed"
    assert state in shown["failureReason"]


@pytest.mark.parametrize("state", ["missing_return_policy", "in_review"])
def test_a_review_or_a_missing_return_policy_stays_pending(env: Env, state: str) -> None:
    bank = approved(env)
    made = env.tenant.org.transfers.create(onramp(bank, address(), "12"), idempotency_key="t")
    env.passes()
    env.fake.set_state(next(iter(env.fake.transfers)), state)
    env.passes(3)
    shown = env.status(made.id)
    assert (shown["status"], shown["failureReason"]) == ("pending", None)


@pytest.mark.parametrize("name", ["AB", "A" * 36, "  AB  "])
def test_owner_names_outside_3_to_35_characters_are_400(env: Env, name: str) -> None:
    onboard(env.t, env.tenant.org.id, env.fake)
    body = {**BANK_ACCOUNT, "account_owner_name": name}
    r = env.api.post("/v1/bank-accounts", json=body, headers={"Idempotency-Key": f"k{len(name)}"})
    assert r.status_code == 400, r.text
    assert [f["field"] for f in r.json()["details"]["fields"]] == ["account_owner_name"]
    assert not env.fake.accounts


@pytest.mark.parametrize("name", ["Abc", "A" * 35])
def test_owner_names_of_3_to_35_characters_register(env: Env, name: str) -> None:
    onboard(env.t, env.tenant.org.id, env.fake)
    body = {**BANK_ACCOUNT, "account_owner_name": name}
    r = env.api.post("/v1/bank-accounts", json=body, headers={"Idempotency-Key": f"k{len(name)}"})
    assert r.status_code == 201, r.text


def test_the_fake_refuses_owner_names_the_provider_refuses(env: Env) -> None:
    fiat = HttpFiat(env.fake.url, api_key=env.fake.api_key)
    started = fiat.start_onboarding("Acme", idempotency_key=new_key(), email="ops@acme.example")
    env.fake.approve(started.customer_id)
    for name in ("AB", "A" * 36, "Acme \u00e9 Ops"):  # too short, too long, not ASCII
        account = {**ACCOUNT.__dict__, "account_owner_name": name}
        with pytest.raises(UpstreamError, match="account_owner_name"):
            fiat.register_external_account(
                started.customer_id, type(ACCOUNT)(**account), idempotency_key=new_key()
            )


def test_a_retry_after_the_idempotency_window_is_resolved_by_look_up(env: Env) -> None:
    """The provider answers 422 to a key reused after 24 h; the plugin finds the
    transfer the first attempt made by its client_reference_id (our key)."""
    fiat = HttpFiat(env.fake.url, api_key=env.fake.api_key)
    started = fiat.start_onboarding("Acme", idempotency_key=new_key(), email="ops@acme.example")
    customer = started.customer_id
    env.fake.approve(customer)
    account = fiat.register_external_account(customer, ACCOUNT, idempotency_key=new_key())
    request = OnRamp("10", "0", account, CHAIN, address())
    for _ in range(150):  # more than a page of the customer's transfers
        fiat.create_transfer(customer, request, idempotency_key=new_key())
    key = new_key()
    first = fiat.create_transfer(customer, request, idempotency_key=key)
    for _ in range(3):
        fiat.create_transfer(customer, request, idempotency_key=new_key())
    env.clock[0] += timedelta(hours=25)
    again = fiat.create_transfer(customer, request, idempotency_key=key)
    assert again.id == first.id and len(env.fake.transfers) == 154
    lookups = env.fake.received("GET", f"/customers/{customer}/transfers")
    assert len(lookups) == 1  # found on the first page, newest first


def test_a_pass_reads_open_transfers_by_pages_not_one_by_one(env: Env) -> None:
    bank = approved(env)
    for i in range(100):
        env.tenant.org.transfers.create(onramp(bank, address(), "1"), idempotency_key=f"t{i}")
    env.passes()  # the first pass reads by id and sets the cursor from what it saw
    assert len(env.fake.received("GET", "/transfers/*")) == 100
    before = len(env.fake.requests)
    env.passes()
    during = env.fake.requests[before:]
    assert [r.path for r in during if r.method == "GET"] == ["/transfers"] * len(during)
    assert 1 <= len(during) <= 3  # pages of 100, not 100 reads
    shown = {t.status for t in env.tenant.org.transfers.list(limit=200).data}
    assert shown == {"submitted"}  # payment_submitted after two moves, read through the list
    env.passes(3)
    assert {t.status for t in env.tenant.org.transfers.list(limit=200).data} == {"completed"}
