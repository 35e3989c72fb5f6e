"""Controls (DESIGN §3): the policy (known destinations, daily limit, approval threshold)
and four-eyes approvals, through the HTTP server on the devnet with the sandbox provider.
What moved is counted on the chain (the wallet's nonce and balance) and in the sandbox
provider's own records, never from the service's view of itself."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.evm.abi import BALANCE_OF
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import (
    BANK_ACCOUNT,
    POLICY_OFF,
    address,
    events,
    idem,
    offramp,
    onramp,
    policy,
    py_policy,
    swap,
)
from .test_cli import _no_outside_settings, cwd, run, run_json  # noqa: F401 (fixtures)

CHAIN = 31337


@dataclass
class Env:
    t: Treasury
    url: str
    alice: httpx.Client  # creates transfers
    bob: httpx.Client  # another user of the same organization: the approver
    now: list[datetime]
    wallet: str
    bank: str

    def create(self, body: dict[str, Any]) -> httpx.Response:
        return self.alice.post("/v1/transfers", json=body, headers=idem())

    def policy(self, **rules: Any) -> dict[str, Any]:
        answer = self.alice.put("/v1/policy", json=policy(**rules))
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def usdc(self, owner: str) -> int:
        chain = self.t.chain(CHAIN)
        return int(
            BALANCE_OF.decode(chain.call(chain.addresses["USDC"], BALANCE_OF.encode(owner)))[0]
        )

    def sent(self) -> int:
        """Transactions the wallet signed that the chain has seen."""
        return int(self.t.chain(CHAIN).pending_nonce(self.wallet))

    def provider_transfers(self) -> int:
        """Transfers the sandbox provider was asked to create (its own records)."""
        with self.t.storage.read() as tx:
            row = tx.one("SELECT COUNT(*) AS n FROM sandbox_fiat WHERE kind = 'transfer'")
        return int(row["n"])

    def run(self) -> None:
        summary = self.t.run_once()
        assert not summary.errors, summary.errors


@pytest.fixture
def env(storage_url: str) -> Iterator[Env]:
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    t = Treasury.open(storage_url, master_key=MASTER_KEY, clock=lambda: now[0])
    tenant = make_tenant(t, user_id="alice")
    bob = t.admin.create_api_key(tenant.org.id, user_id="bob")
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}, timeout=60) as alice,
        httpx.Client(base_url=url, headers={"x-api-key": bob.secret}, timeout=60) as approver,
    ):
        wallet = alice.post("/v1/wallets", json={"label": "Ops"}, headers=idem()).json()["address"]
        chain = t.chain(CHAIN)
        chain.faucet(wallet, "ETH", "10")
        chain.faucet(wallet, "USDC", "1000")
        bank = alice.post("/v1/bank-accounts", json=BANK_ACCOUNT).json()
        yield Env(t, url, alice, approver, now, wallet, bank["providerExternalAccountId"])
    t.close()


# -- the policy ----------------------------------------------------------------------------


def test_every_control_is_off_until_set_and_put_replaces_the_whole_policy(env: Env) -> None:
    off = {**POLICY_OFF, "destinationCooldownHours": 24}
    assert env.alice.get("/v1/policy").json() == off
    set_ = env.policy(approvalThreshold="1000.50", dailyLimit="5000", destinations="known")
    assert set_ == policy(approvalThreshold="1000.5", dailyLimit="5000", destinations="known")
    assert env.alice.get("/v1/policy").json() == set_
    assert env.policy(dailyLimit="10") == policy(dailyLimit="10")  # the rest is off again
    for wrong in (
        policy(dailyLimit="-1"),
        policy(approvalThreshold="0"),
        policy(destinations="some"),
        policy(dailyLimit=10.5),
        policy(limit="1"),
        policy(dailyLimit="1.0000001"),
        policy(destinationCooldownHours=-1),
        policy(destinationCooldownHours="24"),
        policy(gasStation="1"),
    ):
        answer = env.alice.put("/v1/policy", json=wrong)
        assert answer.status_code == 400, (wrong, answer.text)
    assert env.alice.get("/v1/policy").json() == policy(dailyLimit="10")


def test_known_destinations_are_the_organizations_wallets_and_recipients(env: Env) -> None:
    env.policy(destinations="known")
    stranger, saved = address(), address()
    env.alice.post("/v1/recipients", json={"address": saved, "label": "Vendor"}, headers=idem())
    virtual = env.alice.get("/v1/virtual-wallet").json()["address"]
    tracked = address()
    env.alice.post("/v1/wallets/track", json={"address": tracked, "label": "Cold"})
    refused = [
        env.create(swap("deposit", env.wallet, stranger, "1")),
        env.create(swap("withdraw", env.wallet, stranger, "1")),
        env.create(onramp(env.bank, stranger, "1")),
    ]
    for answer in refused:
        assert answer.status_code == 400, answer.text
        (field,) = answer.json()["details"]["fields"]
        assert field["field"] == "destination.to_address"
        assert 'policy (destinations: "known")' in field["message"]
    for to in (env.wallet, saved, virtual, tracked):
        assert env.create(swap("deposit", env.wallet, to, "1")).status_code == 201
    assert env.create(onramp(env.bank, saved.lower(), "1")).status_code == 201
    assert env.create(offramp(env.wallet, env.bank, "1")).status_code == 201  # a bank: no address
    env.policy(destinations="any")
    assert env.create(swap("deposit", env.wallet, stranger, "1")).status_code == 201


# -- the daily limit -----------------------------------------------------------------------


def test_the_daily_limit_counts_the_trailing_24_hours_of_transfers_not_failed(env: Env) -> None:
    env.policy(dailyLimit="100")
    assert env.create(onramp(env.bank, env.wallet, "60")).status_code == 201
    assert env.create(swap("deposit", env.wallet, env.wallet, "30")).status_code == 201
    over = env.create(offramp(env.wallet, env.bank, "10.01"))
    assert over.status_code == 400
    message = over.json()["details"]["fields"][0]["message"]
    assert "daily limit" in message and "100 per 24 hours, 90 accepted, requested 10.01" in message
    assert env.create(offramp(env.wallet, env.bank, "10")).status_code == 201  # exactly 100
    env.now[0] += timedelta(hours=23, minutes=59)
    assert env.create(onramp(env.bank, env.wallet, "1")).status_code == 400
    env.now[0] += timedelta(minutes=2)  # the first three are 24 h old: out of the window
    assert env.create(onramp(env.bank, env.wallet, "99")).status_code == 201
    # a failed transfer does not count: a rejected one frees its part of the limit
    env.policy(dailyLimit="100", approvalThreshold="50")
    env.now[0] += timedelta(hours=25)
    big = env.create(onramp(env.bank, env.wallet, "80")).json()
    assert env.create(onramp(env.bank, env.wallet, "30")).status_code == 400
    assert env.bob.post(f"/v1/transfers/{big['id']}/reject").status_code == 200
    assert env.create(onramp(env.bank, env.wallet, "30")).status_code == 201


def test_concurrent_requests_cannot_pass_the_daily_limit_together(env: Env) -> None:
    """16 transfers of 30 at once against a limit of 100, half on-ramps (no source
    wallet), half deposits from one wallet, each its own connection to the server: three
    are accepted, never more; the others are 400 "daily limit"."""
    env.policy(dailyLimit="100")
    barrier = threading.Barrier(16)
    answers: list[httpx.Response] = []

    def send(i: int) -> None:
        body = (
            onramp(env.bank, env.wallet, "30")
            if i % 2
            else swap("deposit", env.wallet, env.wallet, "30")
        )
        with httpx.Client(base_url=env.url, headers=env.alice.headers, timeout=60) as own:
            barrier.wait()
            answers.append(own.post("/v1/transfers", json=body, headers=idem()))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    accepted = [a.json() for a in answers if a.status_code == 201]
    refused = [a for a in answers if a.status_code != 201]
    assert sum(Decimal(t["from"]["amount"]) for t in accepted) <= 100
    assert len(accepted) == 3
    for answer in refused:
        assert answer.status_code == 400, answer.text
        assert "daily limit" in answer.json()["details"]["fields"][0]["message"]
    feed = env.alice.get("/v1/transfers?limit=50").json()["data"]
    assert sorted(t["id"] for t in feed) == sorted(t["id"] for t in accepted)


# -- approvals -----------------------------------------------------------------------------


def test_nothing_moves_before_a_second_user_approves(env: Env) -> None:
    env.policy(approvalThreshold="100")
    sent, provider, usdc = env.sent(), env.provider_transfers(), env.usdc(env.wallet)
    deposit = env.create(swap("deposit", env.wallet, env.wallet, "100"))
    assert deposit.status_code == 201, deposit.text
    body = deposit.json()
    assert (body["status"], body["approvalStatus"], body["transactionHash"]) == (
        "pending",
        "awaiting",
        None,
    )
    ramps = [
        env.create(onramp(env.bank, env.wallet, "250")).json(),
        env.create(offramp(env.wallet, env.bank, "100")).json(),
    ]
    assert [r["approvalStatus"] for r in ramps] == ["awaiting", "awaiting"]
    small = env.create(swap("deposit", env.wallet, env.wallet, "99.99")).json()
    assert small["approvalStatus"] == "not_required"
    for _ in range(3):
        env.run()
    assert env.sent() == sent + 2  # the small deposit's approval and swap, nothing else
    assert env.provider_transfers() == provider
    assert env.usdc(env.wallet) == usdc - 99_990_000
    for transfer in (body, *ramps):
        shown = env.alice.get(f"/v1/transfers/{transfer['id']}").json()
        assert (shown["status"], shown["approvalStatus"]) == ("pending", "awaiting")
    # the reservation holds: the wallet's available USDC is 1000 - 99.99 - 100 - 100
    short = env.create(swap("deposit", env.wallet, env.wallet, "700.02"))
    assert "insufficient balance: available 700.01 USDC" in short.text
    # four eyes: the creating user may not decide, whatever its key
    alice_again = env.t.admin.create_api_key(
        env.t.for_api_key(env.alice.headers["x-api-key"]).id, user_id="alice"
    )
    with httpx.Client(base_url=env.url, headers={"x-api-key": alice_again.secret}) as same_user:
        for client in (env.alice, same_user):
            for decision in ("approve", "reject"):
                answer = client.post(f"/v1/transfers/{body['id']}/{decision}")
                assert answer.status_code == 403, answer.text
                assert answer.json()["error"].startswith("four eyes")
    approved = env.bob.post(f"/v1/transfers/{body['id']}/approve")
    assert approved.status_code == 200 and approved.json()["approvalStatus"] == "approved"
    assert env.sent() == sent + 2  # not before the jobs' pass
    env.run()  # one pass starts it (and the devnet mines it at once)
    done = env.alice.get(f"/v1/transfers/{body['id']}").json()
    assert done["status"] == "completed" and done["transactionHash"] is not None
    assert env.sent() == sent + 4  # its own approval of exactly its amount, and its swap
    assert env.usdc(env.wallet) == usdc - 199_990_000
    for ramp in ramps:
        assert env.bob.post(f"/v1/transfers/{ramp['id']}/approve").status_code == 200
    env.run()
    assert env.provider_transfers() == provider + 2
    created = [d["id"] for kind, d in events(env.t, "transfer.created")]
    assert created.count(body["id"]) == 1  # announced on acceptance, not again
    assert [
        d["approvalStatus"] for k, d in events(env.t, "transfer.created") if d["id"] == body["id"]
    ] == ["awaiting"]


def test_a_rejection_fails_the_transfer_and_releases_its_hold(env: Env) -> None:
    env.policy(approvalThreshold="900")
    big = env.create(swap("deposit", env.wallet, env.wallet, "900")).json()
    assert "insufficient balance" in env.create(swap("deposit", env.wallet, env.wallet, "200")).text
    rejected = env.bob.post(f"/v1/transfers/{big['id']}/reject")
    assert rejected.status_code == 200
    shown = rejected.json()
    assert (shown["status"], shown["approvalStatus"], shown["failureReason"]) == (
        "failed",
        "rejected",
        "rejected",
    )
    assert env.create(swap("deposit", env.wallet, env.wallet, "200")).status_code == 201
    kinds = [kind for kind, d in events(env.t, "transfer.") if d["id"] == big["id"]]
    assert kinds == ["transfer.created", "transfer.failed"]


def test_repeating_a_decision_answers_the_same_and_the_other_is_409(env: Env) -> None:
    env.policy(approvalThreshold="10")
    first, second = (env.create(onramp(env.bank, env.wallet, "10")).json() for _ in range(2))
    one = env.bob.post(f"/v1/transfers/{first['id']}/approve")
    assert one.status_code == 200
    again = env.bob.post(f"/v1/transfers/{first['id']}/approve")
    assert again.status_code == 200 and again.json() == one.json()
    assert env.bob.post(f"/v1/transfers/{first['id']}/reject").status_code == 409
    assert (
        env.bob.post(f"/v1/transfers/{second['id']}/reject").json()["approvalStatus"] == "rejected"
    )
    assert env.bob.post(f"/v1/transfers/{second['id']}/reject").status_code == 200
    late = env.bob.post(f"/v1/transfers/{second['id']}/approve")
    assert late.status_code == 409 and "rejected" in late.json()["error"]
    plain = env.create(onramp(env.bank, env.wallet, "9")).json()
    assert env.bob.post(f"/v1/transfers/{plain['id']}/approve").status_code == 409
    assert (
        env.bob.post(f"/v1/transfers/{'0' * 8}-0000-4000-8000-{'0' * 12}/approve").status_code
        == 404
    )


def test_an_unanswered_transfer_expires_after_72_hours(env: Env) -> None:
    env.policy(approvalThreshold="10")
    waiting = env.create(swap("deposit", env.wallet, env.wallet, "500")).json()
    env.now[0] += timedelta(hours=71, minutes=59)
    env.run()
    assert env.alice.get(f"/v1/transfers/{waiting['id']}").json()["status"] == "pending"
    env.now[0] += timedelta(minutes=2)
    sent = env.sent()
    env.run()
    shown = env.alice.get(f"/v1/transfers/{waiting['id']}").json()
    assert (shown["status"], shown["failureReason"], shown["approvalStatus"]) == (
        "failed",
        "approval expired",
        "expired",
    )
    assert env.bob.post(f"/v1/transfers/{waiting['id']}/approve").status_code == 409
    assert env.sent() == sent
    assert env.create(swap("deposit", env.wallet, env.wallet, "999")).status_code == 201  # released


def test_an_awaiting_transfer_replays_under_its_key_whatever_the_limit(env: Env) -> None:
    env.policy(approvalThreshold="50", dailyLimit="50")
    key = idem()
    first = env.alice.post("/v1/transfers", json=onramp(env.bank, env.wallet, "50"), headers=key)
    again = env.alice.post("/v1/transfers", json=onramp(env.bank, env.wallet, "50"), headers=key)
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true" and again.json() == first.json()


def test_approvals_in_python_and_the_typed_client(env: Env) -> None:
    from treasury.client import TreasuryClient
    from treasury.errors import Conflict, Forbidden

    org = env.t.for_api_key(env.alice.headers["x-api-key"])
    org.policy.put(**py_policy(approval_threshold="5"))
    waiting = org.transfers.create(onramp(env.bank, env.wallet, "5"), idempotency_key="py")
    assert waiting.approval_status == "awaiting"
    with pytest.raises(Forbidden):
        org.transfers.approve(waiting.id)
    with TreasuryClient(env.url, api_key=env.bob.headers["x-api-key"]) as bob:
        assert bob.policy.get().approval_threshold == "5"
        assert bob.transfers.approve(waiting.id).approval_status == "approved"
        with pytest.raises(Conflict):
            bob.transfers.reject(waiting.id)


@pytest.mark.usefixtures("cwd")
def test_the_cli_shows_and_changes_a_policy() -> None:
    org_id = run_json("orgs", "create", "Acme")["id"]
    assert run_json("policy", "show", org_id) == {**POLICY_OFF, "destinationCooldownHours": 24}
    run("policy", "set", org_id, "--daily-limit", "5000", "--destinations", "known")
    changed = run_json(
        "policy", "set", org_id, "--approval-threshold", "1000", "--destination-cooldown-hours", "0"
    )
    assert changed == policy(approvalThreshold="1000", dailyLimit="5000", destinations="known")
    shown = run("policy", "show", org_id).stdout
    assert "daily limit         5000" in shown and "destinations        known" in shown
    off = run_json("policy", "set", org_id, "--daily-limit", "off")
    assert off["dailyLimit"] is None and off["approvalThreshold"] == "1000"
    assert "daily_limit" in run("policy", "set", org_id, "--daily-limit", "-5", code=1).stderr
    assert "Organization not found" in run("policy", "show", "nope", code=1).stderr
