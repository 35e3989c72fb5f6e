"""Fixtures of the tests that drive one anvil node of their own (a pytest plugin, named
in tests/conftest.py): `node` (per module), `deployed` (our contracts on it, with the
minter key: 0 confirmations unless a test's chain spec says otherwise) and
`chain_state` (each test on the chain as deployed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import rpc
from treasury.anvil import AnvilNode, deploy_contracts, start_anvil


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    from tests.conftest import require_anvil

    require_anvil()
    with start_anvil() as running:
        yield running


@pytest.fixture(scope="module")
def deployed(node: AnvilNode) -> dict[str, Any]:
    return deploy_contracts(node.url)


@pytest.fixture
def chain_state(node: AnvilNode, deployed: dict[str, Any]) -> Iterator[None]:
    """Each test on the deployed chain as it was, mining each transaction at once again
    afterwards, its next base fee as it was (a revert keeps a spike)."""
    snapshot = rpc(node.url, "evm_snapshot")
    base_fee = rpc(node.url, "eth_getBlockByNumber", "latest", False)["baseFeePerGas"]
    yield
    rpc(node.url, "evm_setIntervalMining", 0)
    rpc(node.url, "evm_setAutomine", True)
    rpc(node.url, "evm_revert", snapshot)
    rpc(node.url, "anvil_setNextBlockBaseFeePerGas", base_fee)
