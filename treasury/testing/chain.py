"""The chain conformance suite: what every `Chain` backend must get right.

Subclass `ChainSuite` and provide two fixtures: ``chain``, a `Chain` with our contracts
deployed (`treasury.anvil.deploy_contracts` does that on any node), and ``fund``,
a callable ``fund(address, symbol, amount)`` that gives an account whole units of
``"USDC"``, ``"USDT"``, ``"c0"`` or ``"ETH"`` on that chain::

    import pytest
    from treasury.testing.chain import ChainSuite

    class TestMyChain(ChainSuite):
        @pytest.fixture
        def chain(self):
            chain = MyChain.from_config(...)
            yield chain
            chain.close()

        @pytest.fixture
        def fund(self, chain):
            return lambda address, symbol, amount: ...

Every test works on fresh accounts (`eth_account.Account.create`), so ``chain`` may be
shared by a whole module.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from eth_abi.abi import decode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.address import to_checksum_address

from treasury.backends.chain import ADDRESS_KEYS, OPTIONAL_ADDRESS_KEYS, Chain, Receipt, Reverted
from treasury.backends.chain._deploy import C0_DECIMALS_RANGE
from treasury.errors import UpstreamError
from treasury.evm.abi import GET_ETH_BALANCE, calldata
from treasury.money import to_units

Fund = Callable[[str, str, str], Any]

HASH = re.compile(r"0x[0-9a-f]{64}")
ADDRESS = re.compile(r"0x[0-9a-f]{40}")
#: The decimals of the stablecoins `treasury.anvil.deploy_contracts` deploys; c0's are
#: a setting of the deployment (`C0_DECIMALS_RANGE`), read from c0 (`decimals_of`).
STABLECOIN_DECIMALS = {"USDC": 6, "USDT": 6}


def decimals_of(chain: Chain, symbol: str) -> int:
    """The decimals the chain's token `symbol` answers."""
    data = chain.call(chain.addresses[symbol], calldata("decimals()"))
    return int(decode(["uint8"], data)[0])


def balance_of(chain: Chain, symbol: str, owner: str) -> int:
    data = chain.call(chain.addresses[symbol], calldata("balanceOf(address)", owner))
    return int(decode(["uint256"], data)[0])


def eth_balance(chain: Chain, owner: str) -> int:
    """The ETH of `owner`, read through Multicall3's ``getEthBalance``."""
    data = chain.call(chain.addresses["multicall"], GET_ETH_BALANCE.encode(owner))
    return int(GET_ETH_BALANCE.decode(data)[0])


def send(
    chain: Chain,
    account: LocalAccount,
    to: str,
    data: bytes = b"",
    *,
    value: int = 0,
    gas: int | None = None,
    nonce: int | None = None,
    chain_id: int | None = None,
) -> str:
    """Sign an EIP-1559 transaction with eth-account and broadcast it through `chain`."""
    tx: dict[str, Any] = {
        "type": 2,
        "chainId": chain.chain_id if chain_id is None else chain_id,
        "nonce": chain.pending_nonce(account.address) if nonce is None else nonce,
        "to": to_checksum_address(to),  # eth-account refuses all-lowercase addresses
        "value": value,
        "data": data,
        **chain.fee_fields(),
    }
    if gas is None:
        gas = chain.estimate_gas({"from": account.address, "to": to, "data": data, "value": value})
    signed = account.sign_transaction({**tx, "gas": gas})
    return chain.send_raw_transaction(bytes(signed.raw_transaction))


def mined(chain: Chain, hashes: list[str], timeout: float = 15.0) -> list[Receipt]:
    """The receipts of `hashes` once all are mined (a node may answer before it mines)."""
    deadline = time.monotonic() + timeout
    while True:
        receipts = chain.receipts(hashes)
        if all(receipts):
            return [r for r in receipts if r is not None]
        assert time.monotonic() < deadline, f"not mined within {timeout} s"
        time.sleep(0.02)


class ChainSuite:
    """Tests every chain backend passes; see the module docstring for the fixtures."""

    @pytest.fixture
    def funded(self, chain: Chain, fund: Fund) -> LocalAccount:
        """A fresh account holding 1 ETH and 100 of USDC, USDT and c0."""
        account: LocalAccount = Account.create()
        fund(account.address, "ETH", "1")
        for symbol in ("USDC", "USDT", "c0"):
            fund(account.address, symbol, "100")
        return account

    def test_chain_id(self, chain: Chain) -> None:
        assert isinstance(chain.chain_id, int) and chain.chain_id > 0
        assert isinstance(chain.confirmations, int) and chain.confirmations >= 0

    def test_addresses(self, chain: Chain) -> None:
        assert set(ADDRESS_KEYS) - set(OPTIONAL_ADDRESS_KEYS) <= set(chain.addresses)
        for key in ADDRESS_KEYS:
            assert ADDRESS.fullmatch(chain.addresses[key]), (key, chain.addresses[key])
        assert list(chain.tokens[:3]) == [chain.addresses[k] for k in ("USDC", "USDT", "c0")]

    def test_block_chainid_matches(self, chain: Chain) -> None:
        data = chain.call(chain.addresses["multicall"], calldata("getChainId()"))
        assert int(decode(["uint256"], data)[0]) == chain.chain_id

    def test_call_token_views(self, chain: Chain) -> None:
        stranger = Account.create().address
        for symbol in ("USDC", "USDT", "c0"):
            places = decimals_of(chain, symbol)
            if symbol == "c0":
                assert places in C0_DECIMALS_RANGE  # a setting of the deployment
            else:
                assert places == STABLECOIN_DECIMALS[symbol]
            assert balance_of(chain, symbol, stranger) == 0

    def test_fund_is_exact(self, chain: Chain, fund: Fund) -> None:
        owner = Account.create().address
        fund(owner, "USDC", "250.5")
        fund(owner, "c0", to_units(1, decimals_of(chain, "c0")))  # its smallest unit
        assert balance_of(chain, "USDC", owner) == 250_500_000
        assert balance_of(chain, "c0", owner) == 1
        assert eth_balance(chain, owner) == 0
        fund(owner, "ETH", "0.5")
        assert eth_balance(chain, owner) == 5 * 10**17

    def test_reverting_call_raises(self, chain: Chain) -> None:
        mint = calldata("mint(address,uint256)", Account.create().address, 1)
        with pytest.raises(Reverted, match="not a minter") as caught:
            chain.call(chain.addresses["USDC"], mint)
        assert isinstance(caught.value, UpstreamError)
        assert caught.value.status == 502

    def test_send_raw_transaction_and_receipt(self, chain: Chain, funded: LocalAccount) -> None:
        to = Account.create().address
        transfer = calldata("transfer(address,uint256)", to, 1_500_000)
        tx_hash = send(chain, funded, chain.addresses["USDC"], transfer)
        assert HASH.fullmatch(tx_hash)
        (receipt,) = mined(chain, [tx_hash])
        assert isinstance(receipt, Receipt)
        assert receipt.status == 1
        assert receipt.transaction_hash == tx_hash
        assert HASH.fullmatch(receipt.block_hash)
        assert isinstance(receipt.block_number, int) and receipt.block_number > 0
        assert isinstance(receipt.transaction_index, int) and receipt.transaction_index >= 0
        assert receipt.sender == funded.address.lower()
        assert receipt.to == chain.addresses["USDC"]
        assert receipt.contract_address is None
        assert receipt.type == 2
        assert chain.head() >= receipt.block_number
        assert balance_of(chain, "USDC", to) == 1_500_000
        assert balance_of(chain, "USDC", funded.address) == 98_500_000
        assert chain.receipts([tx_hash.upper().replace("0X", "0x")]) == [receipt]

    def test_transaction_reverting_on_chain_has_status_0(
        self, chain: Chain, funded: LocalAccount
    ) -> None:
        usdt, spender = chain.addresses["USDT"], chain.addresses["swap_facility"]
        first = send(chain, funded, usdt, calldata("approve(address,uint256)", spender, 1))
        # USDT refuses a non-zero -> non-zero approve; an explicit gas limit mines it anyway
        second = send(
            chain, funded, usdt, calldata("approve(address,uint256)", spender, 2), gas=100_000
        )
        receipts = mined(chain, [first, second])
        assert [r.status if r else None for r in receipts] == [1, 0]
        allowance = chain.call(
            usdt, calldata("allowance(address,address)", funded.address, spender)
        )
        assert decode(["uint256"], allowance)[0] == 1

    def test_unknown_receipt_is_none(self, chain: Chain) -> None:
        assert chain.receipts(["0x" + "ab" * 32]) == [None]
        assert chain.receipts([]) == []

    def test_blocks_answer_canonical_hashes(self, chain: Chain, funded: LocalAccount) -> None:
        """``blocks``: the canonical block at each number asked, in order, in one request;
        None above the head. What the reorg check compares its kept hashes with."""
        tx_hash = send(chain, funded, Account.create().address, value=1, gas=21_000)
        (receipt,) = mined(chain, [tx_hash])
        assert receipt is not None
        head = chain.head()
        found = chain.blocks([receipt.block_number, 0, head + 5, receipt.block_number])
        block, genesis, beyond, again = found
        assert block is not None and genesis is not None and again == block
        assert (block.number, block.hash) == (receipt.block_number, receipt.block_hash)
        assert genesis.number == 0 and HASH.fullmatch(genesis.hash) and genesis.hash != block.hash
        assert beyond is None
        assert block.base_fee is None or block.base_fee > 0
        assert chain.blocks([]) == []

    def test_malformed_hash_is_refused(self, chain: Chain) -> None:
        with pytest.raises(ValueError, match="transaction hash"):
            chain.receipts(["0x1234"])

    def test_receipts_keep_order(self, chain: Chain, funded: LocalAccount) -> None:
        nonce = chain.pending_nonce(funded.address)
        sink = Account.create().address
        hashes = [
            send(chain, funded, sink, value=i + 1, gas=21_000, nonce=nonce + i) for i in range(50)
        ]
        mined(chain, hashes)
        unknown = "0x" + "cd" * 32
        asked = sorted([*hashes, unknown])  # an order unrelated to the sending order
        receipts = chain.receipts(asked)
        assert [r.transaction_hash if r else None for r in receipts] == [
            None if h == unknown else h for h in asked
        ]
        assert all(r is None or r.status == 1 for r in receipts)
        assert chain.pending_nonce(funded.address) == nonce + 50

    def test_pending_nonce_increments(self, chain: Chain, funded: LocalAccount) -> None:
        before = chain.pending_nonce(funded.address)
        send(chain, funded, Account.create().address, value=1, gas=21_000)
        assert chain.pending_nonce(funded.address) == before + 1
        assert chain.pending_nonce(Account.create().address) == 0

    def test_mined_nonce_counts_mined_transactions(
        self, chain: Chain, funded: LocalAccount
    ) -> None:
        nonce = chain.pending_nonce(funded.address)
        sent = send(chain, funded, Account.create().address, value=1, gas=21_000)
        deadline = time.monotonic() + 30
        while chain.receipts([sent])[0] is None:  # mined at once, or at the next block
            assert time.monotonic() < deadline, "the transaction was not mined"
            time.sleep(0.05)
        assert chain.mined_nonce(funded.address) == nonce + 1
        assert chain.mined_nonce(Account.create().address) == 0

    def test_replayed_transaction_is_refused(self, chain: Chain, funded: LocalAccount) -> None:
        tx = {
            "type": 2,
            "chainId": chain.chain_id,
            "nonce": chain.pending_nonce(funded.address),
            "to": Account.create().address,
            "value": 1,
            "gas": 21_000,
            **chain.fee_fields(),
        }
        raw = bytes(funded.sign_transaction(tx).raw_transaction)
        chain.send_raw_transaction(raw)
        with pytest.raises(UpstreamError):
            chain.send_raw_transaction(raw)

    def test_other_chain_id_is_refused(self, chain: Chain, funded: LocalAccount) -> None:
        nonce = chain.pending_nonce(funded.address)
        with pytest.raises(UpstreamError):
            send(chain, funded, Account.create().address, value=1, gas=21_000, chain_id=1)
        assert chain.pending_nonce(funded.address) == nonce

    def test_fee_fields(self, chain: Chain) -> None:
        fees = chain.fee_fields()
        assert set(fees) in ({"maxFeePerGas", "maxPriorityFeePerGas"}, {"gasPrice"})
        assert all(isinstance(v, int) and v >= 0 for v in fees.values())
        if "maxFeePerGas" in fees:
            assert fees["maxFeePerGas"] >= fees["maxPriorityFeePerGas"]

    def test_estimate_gas(self, chain: Chain, funded: LocalAccount) -> None:
        usdc = chain.addresses["USDC"]
        transfer = calldata("transfer(address,uint256)", Account.create().address, 1)
        gas = chain.estimate_gas({"from": funded.address, "to": usdc, "data": transfer})
        assert 21_000 < gas < 200_000
        too_much = calldata("transfer(address,uint256)", Account.create().address, 10**30)
        with pytest.raises(Reverted, match="exceeds balance"):
            chain.estimate_gas({"from": funded.address, "to": usdc, "data": too_much})

    def test_multicall_aggregate3_balances(self, chain: Chain, funded: LocalAccount) -> None:
        symbols = ("USDC", "USDT", "c0")
        calls = [
            (chain.addresses[s], False, calldata("balanceOf(address)", funded.address))
            for s in symbols
        ]
        data = chain.call(
            chain.addresses["multicall"], calldata("aggregate3((address,bool,bytes)[])", calls)
        )
        (results,) = decode(["(bool,bytes)[]"], data)
        assert [ok for ok, _ in results] == [True, True, True]
        balances = [decode(["uint256"], raw)[0] for _, raw in results]
        assert balances == [100 * 10 ** decimals_of(chain, s) for s in symbols]

    def test_threads_share_one_chain(self, chain: Chain, funded: LocalAccount) -> None:
        errors: list[BaseException] = []

        def read() -> None:
            try:
                for _ in range(5):
                    assert balance_of(chain, "USDC", funded.address) == 100 * 10**6
                    assert chain.receipts(["0x" + "ef" * 32]) == [None]
            except BaseException as e:  # collected and re-raised below
                errors.append(e)

        threads = [threading.Thread(target=read) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors, errors

    def test_logs_of_transfers_by_recipient_topic(self, chain: Chain, fund: Fund) -> None:
        """``eth_getLogs`` over a block range: the tokens' Transfer logs, narrowed by the
        recipient topic (one of several), in chain order, with their positions."""
        topic = "0x" + "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
        first = chain.head() + 1
        one, two, other = (Account.create().address.lower() for _ in range(3))
        fund(one, "USDC", "1.5")
        fund(other, "USDT", "2")
        fund(two, "c0", "3")
        last = chain.head()
        assert last >= first
        padded = ["0x" + a.removeprefix("0x").rjust(64, "0") for a in (one, two)]
        tokens = [chain.addresses[s] for s in ("USDC", "USDT", "c0")]
        found = chain.logs(first, last, tokens, [topic, None, padded])
        assert [(log.contract, log.topics[2][-40:]) for log in found] == [
            (chain.addresses["USDC"], one[2:]),
            (chain.addresses["c0"], two[2:]),
        ]
        assert int.from_bytes(found[0].data, "big") == 1_500_000
        for log in found:
            assert HASH.fullmatch(log.transaction_hash) and log.topics[0] == topic
            assert first <= log.block_number <= last and log.log_index >= 0
            receipt = chain.receipts([log.transaction_hash])[0]
            assert receipt is not None and receipt.block_number == log.block_number
            assert log.block_hash == receipt.block_hash
        everything = chain.logs(first, last, tokens, [topic])
        assert len(everything) >= 3  # the unfiltered topic finds the third too

    def test_calls_at_a_block(self, chain: Chain, fund: Fund) -> None:
        """``eth_call``s against one block's state, in the order asked: at the head they
        answer as `call` does; at an earlier block, a chain that keeps history answers that
        block's state and one that does not refuses (`UpstreamError`); above the head,
        every chain refuses."""
        owner = Account.create().address
        fund(owner, "USDC", "2")
        before = chain.head()
        fund(owner, "USDC", "3")
        head = chain.head()
        assert head > before
        views = [
            (chain.addresses["USDC"], calldata("balanceOf(address)", owner)),
            (chain.addresses["USDC"], calldata("decimals()")),
        ]
        answers = chain.calls_at(views, head)
        assert [int(decode(["uint256"], a)[0]) for a in answers] == [5_000_000, 6]
        assert answers[0] == chain.call(*views[0])
        if chain.keeps_history:
            (then,) = chain.calls_at(views[:1], before)
            assert int(decode(["uint256"], then)[0]) == 2_000_000
        else:
            with pytest.raises(UpstreamError):
                chain.calls_at(views[:1], before)
        with pytest.raises(UpstreamError):
            chain.calls_at(views[:1], head + 1_000)
        assert chain.calls_at([], head) == []
