"""A store made before the books ties out on its first run after migration 22, which
posts what the records prove (DESIGN §3 "The books"), on a real anvil.

"Before the books" is today's code without migration 22 and without its postings (the
journal's writers made no-ops, the reconcile job not run): a store with deposits, a
deposit into c0 to the same wallet and to another, a withdrawal to an outside address,
on-ramps to a wallet and to an outside address, an off-ramp, a virtual wallet's sweep,
a payment in from outside. Reopened with every migration, it ties out at once, and its
statements add up.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from eth_account import Account
from eth_utils.address import to_checksum_address

from tests.conftest import MASTER_KEY, make_tenant, open_storage, require_anvil
from tests.helpers import BANK_ACCOUNT, offramp, onramp, swap
from treasury import Treasury
from treasury._infra import schema
from treasury._records import postings
from treasury._treasury import JOBS
from treasury.anvil import AnvilNode, deploy_contracts, fund, start_anvil
from treasury.evm.abi import TRANSFER

#: The migration that brings the books (what a store made before them lacks).
BOOKS = 22

CHAIN = 31337
BEFORE_THE_BOOKS = [job.name for job in JOBS if job.name != "reconcile"]


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    require_anvil()
    with start_anvil() as running:
        yield running


def test_a_store_made_before_the_books_ties_out_on_its_first_run(
    node: AnvilNode, storage_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployed = deploy_contracts(node.url)
    chains = {CHAIN: {**deployed, "confirmations": 0}}
    monkeypatch.setattr(schema, "MIGRATIONS", [m for m in schema.MIGRATIONS if m[0] != BOOKS])
    for writer in ("swap_settled", "offramp_sent", "provider_state", "deposit"):
        monkeypatch.setattr(postings, writer, lambda *args, **kwargs: False)

    old = Treasury.open(open_storage(storage_url), master_key=MASTER_KEY, chains=chains)
    org = make_tenant(old).org
    wallet = org.wallets.create(label="A", idempotency_key="a").address
    other = org.wallets.create(label="B", idempotency_key="b").address
    bank = org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
    virtual = org.virtual_wallet.get().address

    def passes(n: int = 1) -> None:
        for _ in range(n):
            summary = old.run_once(BEFORE_THE_BOOKS)
            assert not summary.errors, summary.errors

    def give(who: str, symbol: str, amount: str) -> None:
        fund(node.url, deployed, who, symbol, amount)

    passes()  # the deposit detector starts
    give(wallet, "USDC", "200")
    give(wallet, "c0", "50")
    give(wallet, "ETH", "1")
    give(virtual, "ETH", "1")
    give(virtual, "USDC", "7")  # swept into c0
    payer = Account.create()
    give(payer.address, "ETH", "1")
    give(payer.address, "USDC", "30")
    signed = payer.sign_transaction(
        {
            "to": to_checksum_address(deployed["addresses"]["USDC"]),
            "data": TRANSFER.encode(wallet, 12_000_000),
            "gas": 100_000,
            "nonce": 0,
            "chainId": CHAIN,
            "maxFeePerGas": 10**11,
            "maxPriorityFeePerGas": 10**9,
        }
    )
    old.chain(CHAIN).send_raw_transaction(bytes(signed.raw_transaction))
    passes()
    outside = Account.create().address
    for key, body in enumerate(
        [
            swap("deposit", wallet, wallet, "20"),
            swap("deposit", wallet, other, "15"),
            swap("withdraw", wallet, outside, "5"),
            onramp(bank, wallet, "40"),
            onramp(bank, outside, "9"),
            offramp(wallet, bank, "25"),
        ]
    ):
        org.transfers.create(body, idempotency_key=f"t{key}")
    passes(8)
    shown = org.transfers.list().data
    assert sorted(t.status for t in shown) == ["completed"] * 7, [
        (t.from_.currency, t.to.currency, t.status) for t in shown
    ]  # the six and the sweep
    old.close()
    monkeypatch.undo()

    new = Treasury.open(open_storage(storage_url), master_key=MASTER_KEY, chains=chains)
    try:
        org = new.for_organization(org.id)
        run = org.reconciliation.run()  # its first run: nothing else ran since the migration
        assert run.tied_out and run.pairs == 9 and run.breaks_open == 0, run
        chain = new.chain(CHAIN)
        for who in (wallet, other, virtual):
            for balance in org.ledger.balances(who).balances:
                raw = old_balance(chain, balance.token, who)
                places = new.decimals(CHAIN, balance.token)
                assert Decimal(balance.posted) == Decimal(raw) / 10**places, (who, balance)
        statement = org.statements.get(wallet=wallet, token="USDC")
        total = sum((Decimal(e.amount) for e in statement.entries), Decimal(0))
        assert Decimal(statement.opening) + total == Decimal(statement.closing)
        kinds = {e.kind for e in statement.entries}
        assert kinds == {"deposit", "swap", "onramp", "offramp"}
        with new.storage.read() as tx:
            bank_side = tx.one(
                "SELECT posted FROM journal_balances WHERE account = ?", (f"bank:{bank}",)
            )
        assert bank_side is not None and int(bank_side["posted"]) == (25 - 40 - 9) * 10**6
    finally:
        new.close()


def old_balance(chain: Any, token: str, who: str) -> int:
    from treasury.evm.abi import BALANCE_OF
    from treasury.evm.multicall import multicall

    (found,) = multicall(chain, [(chain.addresses[token], BALANCE_OF, (who,))])
    assert found is not None
    return int(str(found[0]))
