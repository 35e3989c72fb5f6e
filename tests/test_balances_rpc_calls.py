"""Balances of up to 100 tokens cost one eth_call, counted on the wire (anvil) and at the
backend boundary (devnet)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.anvil import fund
from treasury.backends.chain import ChainConfig
from treasury.backends.chain._deploy import artifacts
from treasury.backends.chain.devnet import DevnetChain
from treasury.backends.chain.rpc import RpcChain
from treasury.evm.abi import BALANCE_OF, GET_ETH_BALANCE, calldata

from .conftest import MASTER_KEY, make_tenant
from .helpers import address


def deploy_tokens(w3: Any, count: int, holder: str) -> list[str]:
    """`count` more ERC-20s (6 decimals), each minting `holder` its index in whole units."""
    token = artifacts()["TestStablecoin"]
    factory = w3.eth.contract(abi=token["abi"], bytecode=token["bytecode"])
    sender = w3.eth.accounts[0]
    hashes = [
        factory.constructor(f"Token {i}", f"T{i}").transact({"from": sender}) for i in range(count)
    ]
    addresses = [w3.eth.wait_for_transaction_receipt(h)["contractAddress"].lower() for h in hashes]
    for i, token_address in enumerate(addresses):
        data = calldata("mint(address,uint256)", w3.to_checksum_address(holder), (i + 1) * 10**6)
        w3.eth.send_transaction(
            {"from": sender, "to": w3.to_checksum_address(token_address), "data": data}
        )
    return addresses


def eth_calls(requests: list[httpx.Request]) -> int:
    count = 0
    for request in requests:
        body = json.loads(request.content)
        for message in body if isinstance(body, list) else [body]:
            count += message["method"] == "eth_call"
    return count


@pytest.mark.parametrize(("extra", "expected_calls"), [(0, 1), (97, 1), (98, 2)])
def test_on_anvil_up_to_100_tokens_is_one_eth_call(
    new_storage_url, anvil_config, extra, expected_calls
):
    anvil = anvil_config
    from web3 import HTTPProvider, Web3

    w3 = Web3(HTTPProvider(anvil["url"]))
    holder = address().lower()
    tokens = deploy_tokens(w3, extra, holder)
    fund(anvil["url"], anvil, holder, "USDC", "3")
    sent: list[httpx.Request] = []
    client = httpx.Client(event_hooks={"request": [sent.append]})
    chain = RpcChain(ChainConfig.parse(31337, {**anvil, "tokens": tokens}), client=client)
    t = Treasury.open(new_storage_url("b.db"), master_key=MASTER_KEY, chains={31337: chain})
    org = make_tenant(t).org
    sent.clear()
    balances = org.balances.get(31337, holder)
    assert eth_calls(sent) == expected_calls
    assert len(sent) == expected_calls  # nothing else went over the wire
    assert balances.count == len(balances.data) == 3 + extra + 1  # and ETH, in the same call
    assert balances.data[-1].symbol == "ETH" and balances.data[-1].token == "0x" + "e" * 40
    by_token = {item.token: item for item in balances.data}
    assert by_token[anvil["addresses"]["USDC"]].raw == "3000000"
    for i, token in enumerate(tokens):
        item = by_token[token]
        assert (item.symbol, item.name, item.decimals) == (f"T{i}", f"Token {i}", 6)
        assert item.raw == str((i + 1) * 10**6)
    t.close()
    client.close()


class CountingDevnet(DevnetChain):
    """The real devnet, counting the eth_calls that cross the backend boundary."""

    calls = 0

    def call(self, to: str, data: bytes) -> bytes:
        self.calls += 1
        return super().call(to, data)


def test_on_the_devnet_100_tokens_is_one_eth_call(new_storage_url):
    chain = CountingDevnet()
    holder = address().lower()
    chain.tokens = [*chain.tokens, *deploy_tokens(chain.web3, 97, holder)]
    t = Treasury.open(new_storage_url("d.db"), master_key=MASTER_KEY, chains={31337: chain})
    org = make_tenant(t).org
    chain.calls = 0
    balances = org.balances.get(31337, holder)
    assert chain.calls == 1
    assert balances.count == 101  # and ETH, read in the same call
    assert sum(int(item.raw) for item in balances.data) == sum(range(1, 98)) * 10**6
    t.close()


class RecordingDevnet(DevnetChain):
    """The real devnet, keeping the sub-calls of each multicall that crosses the boundary."""

    batches: list[list[bytes]]

    def call(self, to: str, data: bytes) -> bytes:
        from eth_abi.abi import decode

        if to == self.addresses["multicall"]:
            (calls,) = decode(["(address,bool,bytes)[]"], data[4:])
            self.batches.append([bytes(payload[:4]) for _, _, payload in calls])
        return super().call(to, data)


def test_token_metadata_is_read_once_per_chain(new_storage_url):
    chain = RecordingDevnet()
    chain.batches = []
    t = Treasury.open(new_storage_url("m.db"), master_key=MASTER_KEY, chains={31337: chain})
    org = make_tenant(t).org
    first = org.balances.get(31337, address())
    second = org.balances.get(31337, address())
    assert [item.symbol for item in second.data] == [item.symbol for item in first.data]
    balance_of, eth = BALANCE_OF.selector, GET_ETH_BALANCE.selector
    assert len(chain.batches[0]) == 1 + 4 * 3  # ETH; balance, name, symbol, decimals of 3 tokens
    assert chain.batches[1] == [eth] + [balance_of] * 3  # then balances only
    t.close()
