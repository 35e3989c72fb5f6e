"""The books always tie out (DESIGN §3 "The books"), as a property on a real anvil: any
sequence of faucet mints, deposits into c0, withdrawals, on- and off-ramps, transfers in
from outside and refused transfers leaves every posting group summing to zero per token,
the journal's `posted` equal to `balanceOf` at the run's block for every (wallet, token),
and opening + Σ entries = closing for random statement windows (each also the ledger
balance at its bounds).

Each example runs on a fresh store and on the anvil chain as the module left it
(`evm_snapshot` / `evm_revert`), through the organization's handle as a user runs it.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from eth_account import Account
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import MASTER_KEY, make_tenant
from tests.helpers import BANK_ACCOUNT, offramp, onramp, rpc, swap
from treasury import Treasury
from treasury.anvil import AnvilNode, fund
from treasury.errors import ValidationError
from treasury.evm.abi import BALANCE_OF, TRANSFER
from treasury.evm.multicall import multicall_at

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
    st.tuples(st.just("pass")),
)


class Story:
    """One example: a treasury on the anvil node, an organization with two managed
    wallets (the first funded after the deposit detector started), a bank account."""

    def __init__(self, node: AnvilNode, deployed: dict[str, Any], url: str) -> None:
        self.node, self.deployed = node, deployed
        spec = {**deployed, "confirmations": 0}
        self.t = Treasury.open(url, master_key=MASTER_KEY, chains={CHAIN: spec})
        self.org = make_tenant(self.t).org
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
        self.refused = 0

    def fund(self, who: str, symbol: str, amount: str) -> None:
        fund(self.node.url, self.deployed, who, symbol, amount)

    def to(self, target: str) -> str:
        return {"self": self.wallet, "other": self.other}.get(target) or Account.create().address

    def create(self, body: dict[str, Any]) -> None:
        try:
            self.org.transfers.create(body, idempotency_key=f"k{next(self.keys)}")
        except ValidationError:  # above the available balance: refused, nothing written
            self.refused += 1

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
        for _ in range(12):
            self.t.run_once()
            if all(t.status in ("completed", "failed") for t in self.org.transfers.list().data):
                return
        raise AssertionError("transfers still open after 12 passes")


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(story=st.lists(steps, min_size=2, max_size=8), data=st.data())
def test_any_story_ties_out_and_every_statement_adds_up(
    node: AnvilNode,
    deployed: dict[str, Any],
    new_storage_url: Callable[[str], str],
    story: list[tuple[Any, ...]],
    data: st.DataObject,
) -> None:
    snapshot = rpc(node.url, "evm_snapshot")
    books = Story(node, deployed, new_storage_url(f"story{next(_examples)}.db"))
    try:
        for step in story:
            books.apply(step)
        books.settle()
        check(books, lambda options: data.draw(st.sampled_from(options)))
    finally:
        books.t.close()
        rpc(node.url, "evm_revert", snapshot)


def test_a_story_of_every_kind_ties_out(
    node: AnvilNode, deployed: dict[str, Any], new_storage_url: Callable[[str], str]
) -> None:
    """Every kind of movement at least once, refusals included, in one story."""
    snapshot = rpc(node.url, "evm_snapshot")
    books = Story(node, deployed, new_storage_url("every.db"))
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
        ]:
            books.apply(step)
        books.settle()
        statuses = [t.status for t in books.org.transfers.list().data]
        assert statuses.count("completed") == 6 and books.refused == 1
        with books.t.storage.read() as tx:
            kinds = {row["kind"] for row in tx.query("SELECT DISTINCT kind FROM journal")}
        assert kinds >= {"deposit", "swap", "onramp_funding", "onramp", "offramp", "offramp_payout"}
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
