"""The in-process devnet: the chain conformance suite plus what only the devnet does."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest
from eth_account import Account
from web3 import Web3

from treasury.backends.chain import ChainConfig
from treasury.backends.chain._deploy import DECIMALS
from treasury.backends.chain.base import Reverted
from treasury.backends.chain.devnet import DevnetChain
from treasury.errors import UpstreamError
from treasury.evm.abi import calldata
from treasury.testing.chain import ChainSuite, Fund, balance_of


@pytest.fixture(scope="module")
def devnet() -> Iterator[DevnetChain]:
    """The devnet with its default c0 of 18 decimals (named: a run may change the default)."""
    chain = DevnetChain.from_config(ChainConfig(31337, "devnet://?c0_decimals=18"))
    yield chain
    chain.close()


class TestDevnetChain(ChainSuite):
    @pytest.fixture
    def chain(self, devnet: DevnetChain) -> DevnetChain:
        return devnet

    @pytest.fixture
    def fund(self, devnet: DevnetChain) -> Fund:
        return devnet.faucet


@pytest.fixture(scope="module")
def six() -> Iterator[DevnetChain]:
    """A devnet whose c0 has 6 decimals, as M0's extensions."""
    chain = DevnetChain.from_config(ChainConfig(31337, "devnet://?c0_decimals=6"))
    yield chain
    chain.close()


class TestDevnetChainWithSixDecimalC0(ChainSuite):
    @pytest.fixture
    def chain(self, six: DevnetChain) -> DevnetChain:
        return six

    @pytest.fixture
    def fund(self, six: DevnetChain) -> Fund:
        return six.faucet


def test_c0_decimals_from_the_url_or_the_chain_table(six: DevnetChain) -> None:
    assert six.c0_decimals == 6
    assert DevnetChain().c0_decimals == DECIMALS["c0"]  # the default table's (18)
    table = ChainConfig.parse(31337, {"url": "devnet://", "c0_decimals": 6})
    assert DevnetChain.from_config(table).c0_decimals == 6
    both = ChainConfig.parse(31337, {"url": "devnet://?c0_decimals=18", "c0_decimals": 6})
    assert both.url == "devnet://" and both.c0_decimals == 6  # the table's wins
    owner = Account.create().address
    six.faucet(owner, "c0", "2.5")
    assert balance_of(six, "c0", owner) == 2_500_000
    with pytest.raises(ValueError, match="more than 6 decimal places"):
        six.faucet(owner, "c0", "0.0000001")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("devnet://?c0_decimals=5", "from 6 to 18, got 5"),
        ("devnet://?c0_decimals=19", "from 6 to 18, got 19"),
        ("devnet://?c0_decimals=six", "must be a whole number, got 'six'"),
        ("devnet://?c0_decimals=-6", "must be a whole number, got '-6'"),
        ("devnet://?decimals=6", "unknown devnet:// URL settings: decimals=6"),
        ({"url": "devnet://", "c0_decimals": "6"}, "must be a whole number, got '6'"),
        ({"url": "http://127.0.0.1:1", "c0_decimals": 6}, "c0_decimals is a setting of devnet"),
    ],
)
def test_c0_decimals_refused(spec: str | dict, message: str) -> None:
    from treasury.backends.chain.rpc import RpcChain

    with pytest.raises(ValueError, match=message):
        config = ChainConfig.parse(31337, spec)
        backend = DevnetChain if config.url.startswith("devnet") else RpcChain
        backend.from_config(config)


def test_a_chain_file_keeps_the_decimals_it_was_deployed_with(tmp_path) -> None:
    path = str(tmp_path / "t.chain")
    DevnetChain(state_path=path, c0_decimals=6).close()
    again = DevnetChain(state_path=path)  # no setting: the file's
    assert again.c0_decimals == 6
    again.close()
    with pytest.raises(ValueError, match="has a c0 of 6 decimals, not 18"):
        DevnetChain(state_path=path, c0_decimals=18)
    DevnetChain.from_config(ChainConfig(31337, f"devnet:///{path}?c0_decimals=6")).close()


def test_faucet_amounts_are_exact(devnet: DevnetChain) -> None:
    owner = Account.create().address
    devnet.faucet(owner, "USDC", "250.5")
    devnet.faucet(owner, "USDT", Decimal("0.000001"))
    devnet.faucet(owner, "c0", "1.000000000000000001")  # 18 decimals
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


def test_a_chain_kept_in_a_file_reopens_as_it_was(tmp_path) -> None:
    """Balances, contracts, nonces and receipts survive closing and reopening the file."""
    path = str(tmp_path / "t.chain")
    first = DevnetChain(state_path=path)
    sender = Account.create()
    first.faucet(sender.address, "ETH", "1")
    tx_hash = first.faucet(sender.address, "USDC", "7.5")
    signed = sender.sign_transaction(
        {
            "chainId": 31337,
            "type": 2,
            "nonce": 0,
            "to": Web3.to_checksum_address(first.addresses["USDC"]),
            "gas": 100_000,
            "data": calldata("transfer(address,uint256)", first.deployer, 500_000),
            **first.fee_fields(),
        }
    )
    first.send_raw_transaction(bytes(signed.raw_transaction))
    first.set_earner_rate_bps(777)
    receipt = first.receipts([tx_hash])[0]
    eth = first.web3.eth.get_balance(sender.address)
    head = first.web3.eth.block_number
    first.close()

    again = DevnetChain(state_path=path)
    assert again.addresses == first.addresses
    assert again.web3.eth.block_number == head
    assert balance_of(again, "USDC", sender.address) == 7_000_000
    assert again.web3.eth.get_balance(sender.address) == eth
    assert again.pending_nonce(sender.address) == 1
    assert again.receipts([tx_hash]) == [receipt]
    assert again.earner_rate_bps() == 777
    again.faucet(sender.address, "USDC", "1")  # and it goes on from there
    assert balance_of(again, "USDC", sender.address) == 8_000_000
    again.close()


def test_a_chain_file_serves_one_process(tmp_path) -> None:
    """A second process opening the same file would grow another chain: it is refused."""
    path = tmp_path / "t.chain"
    held = DevnetChain(state_path=str(path))
    code = (
        "from treasury.backends.chain.devnet import DevnetChain\n"
        f"DevnetChain(state_path={str(path)!r})\n"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert other.returncode != 0
    assert "open in another process" in other.stderr and "treasury devnet" in other.stderr
    held.close()
    subprocess.run([sys.executable, "-c", code], check=True)  # free once closed


def test_a_file_of_another_chain_is_refused(tmp_path) -> None:
    path = str(tmp_path / "t.chain")
    DevnetChain(1337, state_path=path).close()
    with pytest.raises(ValueError, match="holds chain 1337"):
        DevnetChain(31337, state_path=path)


def test_the_url_may_name_the_file(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    chain = DevnetChain.from_config(ChainConfig(31337, "devnet:///here.chain"))
    assert chain.state_path == "here.chain" and (tmp_path / "here.chain").exists()
    chain.close()


def test_a_reverted_transaction_is_mined_and_paid_for(devnet: DevnetChain) -> None:
    """Status 0, the nonce used and the gas charged, as on a real chain; eth_call and
    eth_estimateGas of the same call raise the revert reason."""
    sender = Account.create()
    devnet.faucet(sender.address, "ETH", "1")
    mint = calldata("mint(address,uint256)", sender.address, 1)
    signed = sender.sign_transaction(
        {
            "chainId": 31337,
            "type": 2,
            "nonce": 0,
            "to": Web3.to_checksum_address(devnet.addresses["USDC"]),
            "gas": 100_000,
            "data": mint,
            **devnet.fee_fields(),
        }
    )
    tx_hash = devnet.send_raw_transaction(bytes(signed.raw_transaction))
    (receipt,) = devnet.receipts([tx_hash])
    assert receipt is not None and receipt.status == 0
    assert devnet.pending_nonce(sender.address) == 1
    assert devnet.web3.eth.get_balance(sender.address) < 10**18
    with pytest.raises(Reverted, match="not a minter"):
        devnet.estimate_gas({"from": sender.address, "to": devnet.addresses["USDC"], "data": mint})


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"nonce": 5}, "nonce too high"),
        ({"chainId": 1}, "invalid chain id"),
        ({"gas": 20_000}, "intrinsic gas too low"),
        ({"maxFeePerGas": 1, "maxPriorityFeePerGas": 1}, "less than block base fee"),
        ({"value": 10**30}, "insufficient funds"),
    ],
)
def test_refusals_speak_as_nodes_do(devnet: DevnetChain, change: dict, words: str) -> None:
    sender = Account.create()
    devnet.faucet(sender.address, "ETH", "1")
    tx = {
        "chainId": 31337,
        "type": 2,
        "nonce": 0,
        "to": sender.address,
        "gas": 21_000,
        "value": 1,
        **devnet.fee_fields(),
        **change,
    }
    signed = sender.sign_transaction(tx)
    with pytest.raises(UpstreamError, match=words):
        devnet.send_raw_transaction(bytes(signed.raw_transaction))
    assert devnet.pending_nonce(sender.address) == 0


@pytest.mark.parametrize("kind", [0, 1])
def test_legacy_and_access_list_transactions_are_mined(devnet: DevnetChain, kind: int) -> None:
    sender, to = Account.create(), Account.create().address
    devnet.faucet(sender.address, "ETH", "1")
    tx = {
        "chainId": 31337,
        "nonce": 0,
        "to": to,
        "gas": 21_000,
        "value": 5,
        "gasPrice": devnet.fee_fields()["maxFeePerGas"],
    }
    if kind == 1:
        tx |= {"type": 1, "accessList": []}
    tx_hash = devnet.send_raw_transaction(bytes(sender.sign_transaction(tx).raw_transaction))
    (receipt,) = devnet.receipts([tx_hash])
    assert receipt is not None and receipt.status == 1 and receipt.type == kind
    assert receipt.sender == sender.address.lower()
    assert devnet.web3.eth.get_balance(to) == 5


def test_a_deployment_cut_short_leaves_a_file_that_starts_afresh(tmp_path, monkeypatch) -> None:
    """A crash while deploying (here: the third transaction fails) keeps no block."""
    from treasury.backends.chain import _deploy

    path = str(tmp_path / "t.chain")
    sent = []
    original = _deploy._send

    def failing(*args: object, **kwargs: object) -> str:
        if len(sent) == 2:
            raise RuntimeError("the process died here")
        sent.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_deploy, "_send", failing)
    with pytest.raises(RuntimeError, match="died"):
        DevnetChain(state_path=path)
    monkeypatch.undo()
    chain = DevnetChain(state_path=path)
    assert chain.earner_rate_bps() == 415  # deployed whole this time
    assert balance_of(chain, "USDC", chain.addresses["swap_facility"]) >= 10**15
    chain.close()


def test_a_treasury_reads_the_devnet_c0_decimals_and_its_file_keeps_them(tmp_path) -> None:
    from treasury import Treasury

    store = f"sqlite:///{tmp_path / 't.db'}"
    with Treasury.open(store, master_key="0" * 64, chains={31337: "devnet://?c0_decimals=6"}) as t:
        assert t.decimals(31337, "c0") == 6 and t.decimals(31337, "USDC") == 6
    assert (tmp_path / "t.db.chain").exists()
    with Treasury.open(store, master_key="0" * 64, chains={31337: "devnet://"}) as t:
        assert t.decimals(31337, "c0") == 6  # the file's, not the default
