"""The books always tie out (DESIGN §3 "The books"), as a property on a real anvil and the
fake fiat provider over real HTTP: any sequence of faucet mints, deposits into c0,
withdrawals, on- and off-ramps, transfers in from outside, refused transfers, legs that
revert on-chain, fiat transfers the provider fails (before or after it received the
money; refunded, or not yet) and provider outages leaves every posting group summing to
zero per token, the journal's `posted` equal to `balanceOf` at the run's block for every
(wallet, token), the provider's side tied out, and opening + Σ entries = closing for
random statement windows (each also the ledger balance at its bounds).

Each example runs on a fresh store and on the anvil chain as the module left it
(`evm_snapshot` / `evm_revert`), through the organization's handle as a user runs it.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from eth_account import Account
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import MASTER_KEY, make_tenant
from tests.helpers import BANK_ACCOUNT, offramp, onramp, rpc, swap
from treasury import Treasury
from treasury.anvil import AnvilNode, fund
from treasury.backends.fiat.http import HttpFiat
from treasury.errors import ValidationError
from treasury.evm.abi import BALANCE_OF, TRANSFER
from treasury.evm.multicall import multicall_at
from treasury.money import to_raw
from treasury.testing.fake_provider import FakeProvider, fake_provider, onboard

CHAIN = 31337
_examples = itertools.count()


amounts = st.integers(min_value=1, max_value=60).map(str)
targets = st.sampled_from(["self", "other", "outside"])
steps = st.one_of(
    st.tuples(st.just("faucet"), st.sampled_from(["USDC", "USDT", "c0"]), amounts),
    st.tuples(st.just("outside_in"), amounts),
    st.tuples(st.just("deposit"), amounts, targets),
    st.tuples(st.just("withdraw"), amounts, targets),
    st.tuples(st.just("onramp"), amounts, targets),
    st.tuples(st.just("offramp"), amounts),
    st.tuples(st.just("revert"), amounts),
    st.tuples(st.just("provider_fails"), st.integers(min_value=0, max_value=5)),
    st.tuples(st.just("provider_down"), st.integers(min_value=1, max_value=3)),
    st.tuples(st.just("pass")),
)
#: What the provider may fail a transfer into, by where it stands: before the money
#: arrived, or after (an on-ramp's only until it pays out: the fake pays before it ends).
FAILURES = {
    "awaiting_funds": ("canceled", "error"),
    "funds_received": (
        "returned",
        "undeliverable",
        "refund_in_flight",
        "refunded",
        "refund_failed",
        "error",
    ),
}
REVERT = "0x60006000fd"  # PUSH1 0 PUSH1 0 REVERT: code that refuses every call


@pytest.fixture(scope="module")
def provider(node: AnvilNode, deployed: dict[str, Any]) -> Iterator[FakeProvider]:
    """The fake provider, paying on-ramps out on the anvil chain (minting USDC) and
    seeing an off-ramp's USDC once its deposit address holds it."""
    usdc = deployed["addresses"]["USDC"]

    def payout(chain_id: int, to: str, amount: str) -> str:
        return fund(node.url, deployed, to, "USDC", amount).lower()

    def arrived(chain_id: int, address: str, amount: str) -> bool:
        data = "0x" + BALANCE_OF.encode(address).hex()
        held = int(rpc(node.url, "eth_call", {"to": usdc, "data": data}, "latest"), 16)
        return held >= to_raw(amount, 6)

    with fake_provider(payout=payout, deposit_arrived=arrived) as fake:
        yield fake


class Story:
    """One example: a treasury on the anvil node whose fiat provider is the fake one, an
    organization with two managed wallets (the first funded after the deposit detector
    started), a bank account."""

    def __init__(
        self, node: AnvilNode, deployed: dict[str, Any], fake: FakeProvider, url: str
    ) -> None:
        self.node, self.deployed, self.fake = node, deployed, fake
        fake._rules.clear()
        spec = {**deployed, "confirmations": 0}
        fiat = HttpFiat(fake.url, api_key=fake.api_key, timeout=httpx.Timeout(5.0))
        self.t = Treasury.open(url, master_key=MASTER_KEY, chains={CHAIN: spec}, fiat=fiat)
        self.org = make_tenant(self.t).org
        onboard(self.t, self.org.id, fake)
        self.wallet = self.org.wallets.create(label="A", idempotency_key="a").address
        self.other = self.org.wallets.create(label="B", idempotency_key="b").address
        self.bank = self.org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
        self.stranger = Account.create()
        self.t.run_once()  # the deposit detector starts at the head: the books with it
        for symbol, amount in (("USDC", "100"), ("c0", "20"), ("ETH", "1")):
            self.fund(self.wallet, symbol, amount)
        self.fund(self.stranger.address, "ETH", "1")
        self.fund(self.stranger.address, "USDC", "1000")
        self.keys = itertools.count()
        self.refused = self.reverted = self.failed_at_provider = 0
        self.fiat: list[str] = []  # the provider's ids of the fiat transfers, in order

    def fund(self, who: str, symbol: str, amount: str) -> None:
        fund(self.node.url, self.deployed, who, symbol, amount)

    def to(self, target: str) -> str:
        return {"self": self.wallet, "other": self.other}.get(target) or Account.create().address

    def create(self, body: dict[str, Any]) -> str | None:
        try:
            made = self.org.transfers.create(body, idempotency_key=f"k{next(self.keys)}")
        except ValidationError:  # above the available balance: refused, nothing written
            self.refused += 1
            return None
        with self.t.storage.read() as tx:
            row = tx.one("SELECT provider_transfer_id FROM transfers WHERE id = ?", (made.id,))
        if row["provider_transfer_id"] is not None:
            self.fiat.append(str(row["provider_transfer_id"]))
        return str(made.id)

    def reverting(self, body: dict[str, Any]) -> None:
        """Create a transfer while the swap facility refuses every call: its swap leg is
        mined and reverts (the facility's code put back after)."""
        facility = self.deployed["addresses"]["swap_facility"]
        code = rpc(self.node.url, "eth_getCode", facility, "latest")
        rpc(self.node.url, "anvil_setCode", facility, REVERT)
        try:
            made = self.create(body)
        finally:
            rpc(self.node.url, "anvil_setCode", facility, code)
        self.reverted += made is not None

    def fail_at_provider(self, choice: int) -> None:
        """The provider fails the latest fiat transfer, as it may from where it stands."""
        if not self.fiat:
            return
        transfer = self.fake.transfers[self.fiat[-1]]
        onramp = transfer["source"]["payment_rail"] == "ach_push"
        state = transfer["state"]
        if state == "awaiting_funds" and not onramp:  # its USDC is already on its way
            return
        options = FAILURES.get(state)
        if options is not None:
            self.fake.set_state(self.fiat[-1], options[choice % len(options)])
            self.failed_at_provider += 1

    def apply(self, step: tuple[Any, ...]) -> None:
        kind = step[0]
        if kind == "faucet":
            self.fund(self.wallet, step[1], step[2])
        elif kind == "outside_in":  # a payment in, signed by a key the service never held
            rpc(self.node.url, "anvil_impersonateAccount", self.stranger.address)
            usdc = self.deployed["addresses"]["USDC"]
            data = "0x" + TRANSFER.encode(self.wallet, int(step[1]) * 10**6).hex()
            rpc(
                self.node.url,
                "eth_sendTransaction",
                {"from": self.stranger.address, "to": usdc, "data": data, "gas": hex(100_000)},
            )
            rpc(self.node.url, "anvil_stopImpersonatingAccount", self.stranger.address)
        elif kind == "revert":
            self.reverting(swap("deposit", self.wallet, self.wallet, step[1]))
        elif kind == "provider_fails":
            self.fail_at_provider(step[1])
        elif kind == "provider_down":  # its reads fail (5xx) for a while
            self.fake.fail(times=step[1], method="GET", path="/transfers*")
        elif kind in ("deposit", "withdraw"):
            self.create(swap(kind, self.wallet, self.to(step[2]), step[1]))
        elif kind == "onramp":
            self.create(onramp(self.bank, self.to(step[2]), step[1]))
        elif kind == "offramp":
            self.create(offramp(self.wallet, self.bank, step[1]))
        else:
            self.t.run_once()

    def settle(self) -> None:
        """Passes until every transfer is final (the sandbox moves one state a pass)."""
        for _ in range(16):
            self.t.run_once()
            if all(t.status in ("completed", "failed") for t in self.org.transfers.list().data):
                return
        raise AssertionError("transfers still open after 16 passes")


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(story=st.lists(steps, min_size=2, max_size=8), data=st.data())
def test_any_story_ties_out_and_every_statement_adds_up(
    node: AnvilNode,
    deployed: dict[str, Any],
    provider: FakeProvider,
    new_storage_url: Callable[[str], str],
    story: list[tuple[Any, ...]],
    data: st.DataObject,
) -> None:
    snapshot = rpc(node.url, "evm_snapshot")
    books = Story(node, deployed, provider, new_storage_url(f"story{next(_examples)}.db"))
    try:
        for step in story:
            books.apply(step)
        books.settle()
        check(books, lambda options: data.draw(st.sampled_from(options)))
    finally:
        books.t.close()
        rpc(node.url, "evm_revert", snapshot)


def test_a_story_of_every_kind_ties_out(
    node: AnvilNode,
    deployed: dict[str, Any],
    provider: FakeProvider,
    new_storage_url: Callable[[str], str],
) -> None:
    """Every kind of movement at least once, refusals, a reverted leg, failures at the
    provider and an outage included, in one story."""
    snapshot = rpc(node.url, "evm_snapshot")
    books = Story(node, deployed, provider, new_storage_url("every.db"))
    try:
        for step in [
            ("faucet", "USDT", "7"),
            ("outside_in", "12"),
            ("deposit", "30", "other"),
            ("withdraw", "5", "outside"),
            ("pass",),
            ("onramp", "25", "self"),
            ("onramp", "8", "outside"),
            ("offramp", "20"),
            ("deposit", "500", "self"),  # above the balance: refused
            ("withdraw", "3", "self"),
            ("revert", "4"),  # its swap leg reverts on-chain
            ("onramp", "9", "self"),
            ("pass",),  # the provider received the dollars
            ("provider_fails", 3),  # ... and refunds them: funding, then refund
            ("offramp", "6"),
            ("pass",),  # the provider received the USDC
            ("provider_fails", 0),  # ... and the payment came back: it holds the USDC
            ("provider_down", 3),
        ]:
            books.apply(step)
        books.settle()
        statuses = [t.status for t in books.org.transfers.list().data]
        assert statuses.count("completed") == 6 and statuses.count("failed") == 3, statuses
        assert (books.refused, books.reverted, books.failed_at_provider) == (1, 1, 2)
        assert [provider.transfers[i]["state"] for i in books.fiat[-2:]] == [
            "refunded",
            "returned",
        ]
        with books.t.storage.read() as tx:
            kinds = {row["kind"] for row in tx.query("SELECT DISTINCT kind FROM journal")}
        assert kinds >= {
            "deposit",
            "swap",
            "onramp_funding",
            "onramp",
            "offramp",
            "offramp_payout",
            "refund",
        }
        chooser = random.Random(5)
        check(books, chooser.choice)
    finally:
        books.t.close()
        rpc(node.url, "evm_revert", snapshot)


def check(books: Story, choose: Callable[[list[Any]], Any]) -> None:
    t, org = books.t, books.org
    with t.storage.read() as tx:
        rows = tx.query(
            "SELECT group_id, token, amount, at FROM journal WHERE org_id = ?", (org.id,)
        )
    sums: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        sums[(row["group_id"], row["token"])] += int(row["amount"])
    assert rows and all(total == 0 for total in sums.values()), sums  # every group, every token

    run = org.reconciliation.run()
    assert run.tied_out and run.pairs == 6 and run.breaks_open == 0, run
    chain = t.chain(CHAIN)
    pairs = [(w, s) for w in (books.wallet, books.other) for s in ("USDC", "USDT", "c0")]
    calls = [(chain.addresses[s], BALANCE_OF, (w,)) for w, s in pairs]
    on_chain = multicall_at(chain, calls, run.block_number)
    for (wallet, symbol), found in zip(pairs, on_chain, strict=True):
        assert found is not None
        (posted,) = [b for b in org.ledger.balances(wallet).balances if b.token == symbol]
        raw = Decimal(int(str(found[0]))) / 10 ** t.decimals(CHAIN, symbol)
        assert Decimal(posted.posted) == raw, (wallet, symbol)  # posted = balanceOf
        assert posted.pending == "0"  # every transfer is final

    times = sorted({row["at"] for row in rows})
    for _ in range(3):  # random windows over the postings' times
        first, last = sorted([choose(times), choose(times)])
        if first == last:
            continue
        wallet = choose([books.wallet, books.other])
        symbol = choose(["USDC", "USDT", "c0"])
        statement = org.statements.get(wallet=wallet, token=symbol, **{"from": first, "to": last})
        total = sum((Decimal(e.amount) for e in statement.entries), Decimal(0))
        assert Decimal(statement.opening) + total == Decimal(statement.closing)
        at_bounds = [
            [b.posted for b in org.ledger.balances(wallet, at=moment).balances if b.token == symbol]
            for moment in (first, last)
        ]
        assert at_bounds == [[statement.opening], [statement.closing]]
        for entry, before in zip(statement.entries, [statement.opening, *statement.entries]):
            previous = before if isinstance(before, str) else before.balance
            assert Decimal(previous) + Decimal(entry.amount) == Decimal(entry.balance)
