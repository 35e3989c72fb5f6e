"""`RpcChain` against a real anvil node: the chain conformance suite, batching, failures.

Needs the anvil binary of ``npm ci`` (or ``TREASURY_ANVIL``): skipped without it, except
under ``CI``, where a missing anvil fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from eth_account import Account

from treasury.anvil import AnvilNode, deploy_contracts, fund, start_anvil
from treasury.backends.chain import ChainConfig
from treasury.backends.chain.rpc import BATCH_SIZE, RpcChain
from treasury.errors import UpstreamError
from treasury.testing.chain import ChainSuite, Fund, send

from .conftest import require_anvil


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    require_anvil()
    with start_anvil() as node:
        yield node


@pytest.fixture(scope="module")
def config(node: AnvilNode) -> dict[str, Any]:
    return deploy_contracts(node.url)


@pytest.fixture(scope="module")
def rpc(config: dict[str, Any]) -> Iterator[RpcChain]:
    chain = RpcChain.from_config(ChainConfig.parse(31337, config))
    yield chain
    chain.close()


class TestRpcChain(ChainSuite):
    @pytest.fixture
    def chain(self, rpc: RpcChain) -> RpcChain:
        return rpc

    @pytest.fixture
    def fund(self, node: AnvilNode, config: dict[str, Any]) -> Fund:
        return lambda address, symbol, amount: fund(node.url, config, address, symbol, amount)


def test_receipts_are_batched(node: AnvilNode, config: dict[str, Any], rpc: RpcChain) -> None:
    account = Account.create()
    fund(node.url, config, account.address, "ETH", "1")
    nonce = rpc.pending_nonce(account.address)
    sent = [
        send(rpc, account, account.address, value=1, gas=21_000, nonce=nonce + i) for i in range(20)
    ]
    hashes = [*sent, *(f"0x{i:064x}" for i in range(1_000 - len(sent)))]
    posts: list[httpx.Request] = []
    client = httpx.Client(event_hooks={"request": [posts.append]})
    counted = RpcChain(ChainConfig.parse(31337, config), client=client)
    posts.clear()  # the chain-id check on connect

    receipts = counted.receipts(hashes)

    assert len(posts) == -(-len(hashes) // BATCH_SIZE) <= 10
    assert [r.transaction_hash for r in receipts[: len(sent)] if r] == sent
    assert receipts[len(sent) :] == [None] * (len(hashes) - len(sent))
    posts.clear()
    counted.receipts([])
    assert posts == []
    client.close()


def test_missing_addresses_are_named(node: AnvilNode) -> None:
    with pytest.raises(ValueError, match="of swap_facility, earner_rate_source \\("):
        RpcChain.from_config(
            ChainConfig.parse(31337, {"url": node.url, "addresses": {"USDC": "0x" + "11" * 20}})
        )


def test_multicall_defaults_to_the_canonical_address(config: dict[str, Any]) -> None:
    addresses = {k: v for k, v in config["addresses"].items() if k != "multicall"}
    chain = RpcChain.from_config(ChainConfig.parse(31337, {**config, "addresses": addresses}))
    assert chain.addresses["multicall"] == "0xca11bde05977b3631167028862be2a173976ca11"
    chain.close()


def test_chain_id_mismatch_is_a_clear_error(config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="answers chain id 31337") as caught:
        RpcChain.from_config(ChainConfig.parse(1, config))
    assert "chain 1" in str(caught.value)


def test_unreachable_node_is_upstream_error(config: dict[str, Any]) -> None:
    with start_anvil() as other:
        url = other.url
        chain = RpcChain.from_config(ChainConfig.parse(31337, {**config, "url": url}))
        assert chain.pending_nonce(Account.create().address) == 0
        other.process.kill()
        other.process.wait()
    with pytest.raises(UpstreamError, match="unreachable"):
        chain.pending_nonce(Account.create().address)
    with pytest.raises(UpstreamError):
        chain.receipts(["0x" + "ab" * 32])
    chain.close()
    with pytest.raises(UpstreamError):
        RpcChain.from_config(ChainConfig.parse(31337, {**config, "url": url}))


def test_json_rpc_errors_are_upstream_errors(config: dict[str, Any]) -> None:
    def node(request: httpx.Request) -> httpx.Response:
        body = request.read()
        if b"eth_chainId" in body:
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": "0x7a69"})
        if b"eth_getTransactionCount" in body:
            return httpx.Response(502, text="bad gateway")
        error = {"code": -32005, "message": "rate limited"}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 2, "error": error})

    client = httpx.Client(transport=httpx.MockTransport(node))
    chain = RpcChain(
        ChainConfig.parse(31337, {**config, "url": "https://rpc.example/v3/SECRET"}), client=client
    )
    with pytest.raises(UpstreamError, match="rate limited"):
        chain.fee_fields()
    with pytest.raises(UpstreamError, match="HTTP 502") as caught:
        chain.pending_nonce("0x" + "11" * 20)
    assert "SECRET" not in caught.value.message
    with pytest.raises(UpstreamError):
        chain.receipts(["0x" + "ab" * 32])


def test_the_web3_import_is_lazy_in_the_rpc_module() -> None:
    import subprocess
    import sys

    code = "import sys, treasury.backends.chain.rpc; print('web3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_start_anvil_refuses_a_busy_port(node: AnvilNode) -> None:
    with pytest.raises(OSError, match="in use"):
        start_anvil(port=node.port)
