"""The books against the fiat provider (DESIGN §3 "The books"), on a real anvil and the
fake provider over real HTTP: an off-ramp whose USDC the provider never acknowledges is
one ``provider_mismatch`` once its grace has passed (in flight before), resolved when
the provider agrees or when an admin accepts it; a fiat transfer that fails after the
provider received its money keeps it at the provider in the books until the provider
refunds it, and the refund is posted once (an on-ramp's dollars back to the bank, an
off-ramp's USDC back to the world, a deposit when it lands in the wallet again).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import MASTER_KEY, make_tenant
from tests.helpers import BANK_ACCOUNT, events, offramp, onramp
from treasury import Treasury
from treasury.anvil import AnvilNode, fund
from treasury.backends.fiat.http import HttpFiat
from treasury.config import Settings
from treasury.testing.fake_provider import FakeProvider, fake_provider, onboard

CHAIN = 31337
INTERVAL = 600  # the reconcile interval: a provider difference's grace


class Env:
    """A treasury on anvil (0 confirmations) whose fiat provider is the fake one, its
    clock skewable; an onboarded organization with a wallet holding 100 USDC and 1 ETH
    (after the deposit detector started), a bank account."""

    def __init__(self, node: AnvilNode, deployed: dict[str, Any], fake: FakeProvider, url: str):
        self.node, self.deployed, self.fake = node, deployed, fake
        self.skew = timedelta(0)
        self.t = Treasury.open(
            url,
            master_key=MASTER_KEY,
            chains={CHAIN: {**deployed, "confirmations": 0}},
            fiat=HttpFiat(fake.url, api_key=fake.api_key, timeout=httpx.Timeout(5.0)),
            clock=lambda: datetime.now(UTC) + self.skew,
            settings=Settings(reconcile_interval=INTERVAL),
        )
        self.org = make_tenant(self.t).org
        onboard(self.t, self.org.id, fake)
        self.wallet = self.org.wallets.create(label="Ops", idempotency_key="w").address
        self.bank = self.org.bank_accounts.create(BANK_ACCOUNT)
        self.passes()  # the deposit detector starts at the head: the books with it
        fund(node.url, deployed, self.wallet, "USDC", "100")
        fund(node.url, deployed, self.wallet, "ETH", "1")
        self.passes()

    def passes(self, n: int = 1) -> None:
        for _ in range(n):
            summary = self.t.run_once()
            assert not summary.errors, summary.errors

    def provider_id(self, transfer_id: str) -> str:
        with self.t.storage.read() as tx:
            row = tx.one("SELECT provider_transfer_id FROM transfers WHERE id = ?", (transfer_id,))
        return str(row["provider_transfer_id"])

    def at_provider(self, transfer_id: str) -> int:
        """What the books hold at the provider for a transfer (raw USDC)."""
        with self.t.storage.read() as tx:
            row = tx.one(
                "SELECT posted FROM journal_balances WHERE account = ?",
                (f"provider:{transfer_id}",),
            )
        return 0 if row is None else int(row["posted"])

    def groups(self, transfer_id: str) -> list[tuple[str, str, str]]:
        with self.t.storage.read() as tx:
            rows = tx.query(
                "SELECT group_id, account, amount FROM journal WHERE transfer_id = ? ORDER BY id",
                (transfer_id,),
            )
        return [
            (r["group_id"].split(":")[0], r["account"].split(":")[0], r["amount"]) for r in rows
        ]

    def status(self, transfer_id: str) -> str:
        return str(self.org.transfers.get(transfer_id).status)


@pytest.fixture
def env(
    node: AnvilNode, deployed: dict[str, Any], storage_url: str, chain_state: None
) -> Iterator[Env]:
    def payout(chain_id: int, to: str, amount: str) -> str:
        return fund(node.url, deployed, to, "USDC", amount).lower()

    with fake_provider(payout=payout) as fake:
        opened = Env(node, deployed, fake, storage_url)
        try:
            yield opened
        finally:
            opened.t.close()


def unacknowledged_offramp(env: Env) -> Any:
    """An off-ramp of 40 USDC whose send is mined and settled while the provider never
    sees it arrive (its state stays ``awaiting_funds``)."""
    env.fake.deposit_arrived = lambda chain_id, address, amount: False
    made = env.org.transfers.create(
        offramp(env.wallet, env.bank.provider_external_account_id, "40")
    )
    env.passes(2)
    assert env.status(made.id) == "pending" and env.at_provider(made.id) == 40_000_000
    return made


def test_an_offramp_the_provider_never_acknowledges_is_a_provider_mismatch_after_its_grace(
    env: Env,
) -> None:
    made = unacknowledged_offramp(env)
    run = env.org.reconciliation.run()  # within the grace: in flight, no break
    assert run.pairs_tied_out == run.pairs and run.in_flight == 1 and run.breaks_open == 0
    assert not run.tied_out and env.org.reconciliation.get().open == []

    env.skew = timedelta(seconds=INTERVAL + 1)
    run = env.org.reconciliation.run()
    assert not run.tied_out and run.breaks_open == 1 and run.pairs_tied_out == run.pairs
    (found,) = env.org.reconciliation.get().open
    assert (found.kind, found.wallet, found.token, found.chain_id) == (
        "provider_mismatch",
        env.wallet.lower(),
        "USDC",
        CHAIN,
    )
    assert (found.expected, found.actual, found.difference) == ("40", "0", "-40")
    assert found.evidence == [made.id, f"{env.provider_id(made.id)}@awaiting_funds"]
    env.passes()  # the job's own run, and later ones: the same break, announced once
    env.org.reconciliation.run()
    assert [b.id for b in env.org.reconciliation.get().open] == [found.id]
    assert [d["id"] for _, d in events(env.t, "reconciliation.break_opened")] == [found.id]

    env.fake.deposit_arrived = lambda chain_id, address, amount: True  # it saw the USDC
    for _ in range(6):
        env.passes()
        if env.status(made.id) == "completed":
            break
    assert env.status(made.id) == "completed" and env.at_provider(made.id) == 0
    run = env.org.reconciliation.run()
    assert run.tied_out and run.breaks_open == 0
    (resolved,) = env.org.reconciliation.breaks(status="resolved").data
    assert resolved.id == found.id and resolved.note.startswith("the provider agrees")
    assert [d["id"] for _, d in events(env.t, "reconciliation.break_resolved")] == [found.id]


def test_an_admin_accepting_a_provider_mismatch_writes_the_money_off_at_the_provider(
    env: Env,
) -> None:
    made = unacknowledged_offramp(env)
    env.skew = timedelta(seconds=INTERVAL + 1)
    env.org.reconciliation.run()
    (found,) = env.org.reconciliation.get().open
    done = env.org.reconciliation.resolve(found.id, note="the provider lost it")
    assert done.status == "resolved" and done.note == "the provider lost it"
    assert env.at_provider(made.id) == 0  # written off: provider -40, external +40
    with env.t.storage.read() as tx:
        rows = tx.query(
            "SELECT account, amount FROM journal WHERE group_id = ? ORDER BY account",
            (f"correction:{found.id}",),
        )
    assert [(r["account"], r["amount"]) for r in rows] == [
        ("external", "40000000"),
        (f"provider:{made.id}", "-40000000"),
    ]
    run = env.org.reconciliation.run()
    assert run.tied_out and run.breaks_open == 0
    usdc = [b for b in env.org.ledger.balances(env.wallet).balances if b.token == "USDC"]
    assert [b.posted for b in usdc] == ["60"]  # the USDC did leave the wallet


def test_an_onramp_refunded_after_funding_posts_the_dollars_back_to_the_bank_once(
    env: Env,
) -> None:
    made = env.org.transfers.create(onramp(env.bank.provider_external_account_id, env.wallet, "25"))
    provider_id = env.provider_id(made.id)
    env.passes()  # the provider received the dollars (one state a read)
    assert env.at_provider(made.id) == 25_000_000
    env.fake.set_state(provider_id, "returned")  # failed at the provider, refund under way
    env.passes()
    assert env.status(made.id) == "failed" and env.at_provider(made.id) == 25_000_000
    run = env.org.reconciliation.run()  # the provider holds it, as the books say
    assert run.tied_out, run

    env.fake.set_state(provider_id, "refunded")
    env.passes(2)
    assert env.at_provider(made.id) == 0
    assert env.groups(made.id) == [
        ("funding", "bank", "-25000000"),
        ("funding", "provider", "25000000"),
        ("refund", "bank", "25000000"),
        ("refund", "provider", "-25000000"),
    ]
    assert env.status(made.id) == "failed"
    assert env.org.transfers.get(made.id).failure_reason.endswith("refunded")
    env.passes(2)  # read no more: nothing posted twice
    assert len(env.groups(made.id)) == 4
    assert env.org.reconciliation.run().tied_out


def test_an_offramp_refunded_after_its_usdc_arrived_ties_out_when_the_usdc_comes_back(
    env: Env,
) -> None:
    made = env.org.transfers.create(
        offramp(env.wallet, env.bank.provider_external_account_id, "30")
    )
    provider_id = env.provider_id(made.id)
    env.passes(2)
    assert env.at_provider(made.id) == 30_000_000
    env.fake.set_state(provider_id, "undeliverable")
    env.passes()
    assert env.status(made.id) == "failed" and env.org.reconciliation.run().tied_out
    env.fake.set_state(provider_id, "refunded")  # the USDC goes back to its sender
    env.passes()
    assert env.at_provider(made.id) == 0
    assert [g for g in env.groups(made.id) if g[0] == "refund"] == [
        ("refund", "external", "30000000"),
        ("refund", "provider", "-30000000"),
    ]
    fund(env.node.url, env.deployed, env.wallet, "USDC", "30")  # it lands: a deposit
    env.passes()
    run = env.org.reconciliation.run()
    assert run.tied_out and run.breaks_open == 0
    usdc = [b for b in env.org.ledger.balances(env.wallet).balances if b.token == "USDC"]
    assert [b.posted for b in usdc] == ["100"]
