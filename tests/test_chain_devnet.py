"""The in-process devnet: the chain conformance suite plus what only the devnet does."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal

import pytest
from eth_account import Account

from treasury.backends.chain import ChainConfig
from treasury.backends.chain.devnet import DevnetChain
from treasury.testing.chain import ChainSuite, Fund, balance_of


@pytest.fixture(scope="module")
def devnet() -> Iterator[DevnetChain]:
    chain = DevnetChain.from_config(ChainConfig(31337, "devnet://"))
    yield chain
    chain.close()


class TestDevnetChain(ChainSuite):
    @pytest.fixture
    def chain(self, devnet: DevnetChain) -> DevnetChain:
        return devnet

    @pytest.fixture
    def fund(self, devnet: DevnetChain) -> Fund:
        return devnet.faucet


def test_faucet_amounts_are_exact(devnet: DevnetChain) -> None:
    owner = Account.create().address
    devnet.faucet(owner, "USDC", "250.5")
    devnet.faucet(owner, "USDT", Decimal("0.000001"))
    devnet.faucet(owner, "c0", "1.000000000000000001")
    devnet.faucet(owner, "ETH", "2")
    assert balance_of(devnet, "USDC", owner) == 250_500_000
    assert balance_of(devnet, "USDT", owner) == 1
    assert balance_of(devnet, "c0", owner) == 10**18 + 1
    assert devnet.web3.eth.get_balance(owner) == 2 * 10**18


def test_faucet_returns_the_mined_hash(devnet: DevnetChain) -> None:
    tx_hash = devnet.faucet(Account.create().address, "usdc", 1)
    (receipt,) = devnet.receipts([tx_hash])
    assert receipt is not None and receipt.status == 1
    assert receipt.to == devnet.addresses["USDC"]


@pytest.mark.parametrize(
    ("symbol", "amount", "message"),
    [
        ("USDC", "0.0000001", "more than 6 decimal places"),
        ("ETH", "0.0000000000000000001", "more than 18 decimal places"),
        ("USDC", "-1", "positive"),
        ("USDC", "0", "positive"),
        ("USDC", "NaN", "positive"),
        ("USDC", "ten", "not a positive decimal"),
        ("DAI", "1", "unknown symbol"),
    ],
)
def test_faucet_refuses(devnet: DevnetChain, symbol: str, amount: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        devnet.faucet(Account.create().address, symbol, amount)


def test_earner_rate(devnet: DevnetChain) -> None:
    other = DevnetChain()
    assert other.earner_rate_bps() == 415
    other.set_earner_rate_bps(512)
    assert other.earner_rate_bps() == 512
    assert devnet.earner_rate_bps() == 415
    with pytest.raises(ValueError):
        other.set_earner_rate_bps(-1)


def test_instances_are_independent(devnet: DevnetChain) -> None:
    owner = Account.create().address
    other = DevnetChain()
    other.faucet(owner, "USDC", "5")
    assert balance_of(other, "USDC", owner) == 5 * 10**6
    assert balance_of(devnet, "USDC", owner) == 0
    assert other.addresses == devnet.addresses  # same deployer, same nonces


def test_configured_chain_id_and_tokens() -> None:
    extra = "0x" + "ab" * 20
    chain = DevnetChain.from_config(ChainConfig(1337, "devnet://", tokens=(extra.upper(),)))
    assert chain.chain_id == chain.web3.eth.chain_id == 1337
    assert chain.tokens[3:] == [extra]
    with pytest.raises(ValueError, match="deploys its own"):
        DevnetChain.from_config(ChainConfig(31337, "devnet://", {"USDC": extra}))


def test_web3_is_bound_and_locked(devnet: DevnetChain) -> None:
    w3 = devnet.web3
    assert w3.eth.chain_id == 31337
    with devnet.lock:  # re-entrant: a caller may hold it around several requests
        assert w3.eth.get_code(w3.to_checksum_address(devnet.addresses["multicall"]))


def test_reserves_allow_withdrawals(devnet: DevnetChain) -> None:
    facility = devnet.addresses["swap_facility"]
    assert balance_of(devnet, "USDC", facility) >= 10**15
    assert balance_of(devnet, "USDT", facility) >= 10**15


def test_start_time_is_small() -> None:
    started = time.perf_counter()
    DevnetChain()
    assert time.perf_counter() - started < 3.0


def test_start_leaves_warning_filters_alone() -> None:
    import warnings

    before = list(warnings.filters)
    DevnetChain()
    assert warnings.filters == before
