"""The sandbox fiat provider runs the fiat conformance suite, bound to a real in-process
devnet: on-ramps are paid out by minting USDC there, and off-ramps wait for the USDC
to arrive at their deposit address there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from treasury._infra.schema import migrate
from treasury.backends.chain.devnet import DevnetChain
from treasury.backends.fiat.base import FiatContext, OffRamp, ProviderTransfer
from treasury.backends.fiat.sandbox import SandboxFiat
from treasury.evm.abi import BALANCE_OF
from treasury.money import to_raw
from treasury.testing.fiat import ACCOUNT, FiatSuite, Settle

from .conftest import open_storage


@pytest.fixture(scope="module")
def devnet() -> Iterator[DevnetChain]:
    chain = DevnetChain()
    yield chain
    chain.close()


def step(fiat: SandboxFiat, transfer_id: str) -> ProviderTransfer:
    """One worker pass: the sandbox's step, then the read."""
    fiat.advance([transfer_id])
    (view,) = fiat.transfers([transfer_id])
    return view


def usdc_of(chain: DevnetChain, address: str) -> int:
    data = chain.call(chain.addresses["USDC"], BALANCE_OF.encode(address))
    return int(BALANCE_OF.decode(data)[0])


class TestSandboxFiat(FiatSuite):
    chain_id = 31337

    @pytest.fixture
    def fiat(self, devnet: DevnetChain) -> SandboxFiat:
        provider = SandboxFiat.from_url("sandbox://")
        provider.bind(FiatContext(chain=lambda chain_id: devnet))
        return provider

    @pytest.fixture
    def settle(self, devnet: DevnetChain) -> Settle:
        def send(transfer: ProviderTransfer, request: OffRamp) -> None:
            assert transfer.deposit_address is not None
            devnet.faucet(transfer.deposit_address, "USDC", request.amount)

        return send


def test_an_onramp_payout_is_minted_on_the_chain(devnet: DevnetChain) -> None:
    """The payout's hash is a real transaction: the destination holds amount - fee."""
    fiat = SandboxFiat()
    fiat.bind(FiatContext(chain=lambda chain_id: devnet))
    suite = TestSandboxFiat()
    customer = fiat.create_customer("Acme", idempotency_key="c")
    account = fiat.register_external_account(customer, ACCOUNT, idempotency_key="a")
    request = suite.onramp(account, "12.5", "0.5")
    made = fiat.create_transfer(customer, request, idempotency_key="t")
    views = [step(fiat, made.id) for _ in range(3)]
    assert views[-1].state == "payment_processed"
    assert devnet.receipts([views[-1].destination_tx_hash or ""])[0] is not None
    assert usdc_of(devnet, request.to_address) == to_raw("12", 6)


def test_bound_to_a_store_it_remembers_everything_across_instances(
    devnet: DevnetChain, storage_url: str
) -> None:
    """A new instance on the same store (a restarted process) knows the customer, the
    bank account, the virtual account and its balance, and moves an open transfer on."""
    storage = open_storage(storage_url)
    migrate(storage, now="2026-01-01T00:00:00.000000Z")

    def provider() -> SandboxFiat:
        fiat = SandboxFiat()
        fiat.bind(FiatContext(chain=lambda chain_id: devnet, storage=storage))
        return fiat

    first = provider()
    customer = first.create_customer("Acme", idempotency_key="c")
    account = first.register_external_account(customer, ACCOUNT, idempotency_key="a")
    virtual = first.create_virtual_account(customer, idempotency_key="v")
    first.deposit_to_virtual_account(virtual.id, "12.25")
    made = first.create_transfer(
        customer, TestSandboxFiat().onramp(account, "3", "0"), idempotency_key="t"
    )
    assert step(first, made.id).state == "funds_received"

    again = provider()
    assert again.create_customer("Acme", idempotency_key="c") == customer
    assert again.accounts == {account: ACCOUNT}
    assert again.create_virtual_account(customer, idempotency_key="v") == virtual
    assert again.wallet_balance(customer, virtual.wallet_id) == "12.25"
    views = [step(again, made.id) for _ in range(2)]
    assert [v.state for v in views] == ["payment_submitted", "payment_processed"]
    assert views[0].destination_tx_hash == views[1].destination_tx_hash  # paid once
    storage.close()


def test_reading_changes_nothing(devnet: DevnetChain, storage_url: str) -> None:
    """Reading the sandbox's state twice (transfers, a virtual account, its wallet's
    balance) answers the same, moves no transfer and sends no transaction; its step
    moves each open transfer once."""
    storage = open_storage(storage_url)
    migrate(storage, now="2026-01-01T00:00:00.000000Z")
    fiat = SandboxFiat()
    fiat.bind(FiatContext(chain=lambda chain_id: devnet, storage=storage))
    customer = fiat.create_customer("Acme", idempotency_key="c")
    account = fiat.register_external_account(customer, ACCOUNT, idempotency_key="a")
    virtual = fiat.create_virtual_account(customer, idempotency_key="v")
    fiat.deposit_to_virtual_account(virtual.id, "5")
    suite = TestSandboxFiat()
    onramp = fiat.create_transfer(customer, suite.onramp(account, "3", "0"), idempotency_key="1")
    offramp = fiat.create_transfer(customer, suite.offramp(account), idempotency_key="2")
    ids = [onramp.id, offramp.id]
    step(fiat, onramp.id)  # funds_received: the next step pays out

    def state() -> tuple[object, ...]:
        return (
            fiat.transfers(ids),
            fiat.create_virtual_account(customer, idempotency_key="v"),
            fiat.wallet_balance(customer, virtual.wallet_id),
            fiat.accounts,
        )

    head = devnet.head()
    first = state()
    assert state() == first
    assert devnet.head() == head  # no transaction: nothing minted, nothing sent
    assert [v.state for v in first[0]] == ["funds_received", "awaiting_funds"]
    fiat.advance(ids)
    assert [v.state for v in fiat.transfers(ids)] == ["payment_submitted", "awaiting_funds"]
    assert devnet.head() == head + 1  # the payout, minted by the step
    storage.close()
