"""The plugin interfaces speak only their own plain types: no product logic in them."""

from __future__ import annotations

import typing

from treasury.backends.chain.base import Chain
from treasury.backends.chain.devnet import DevnetChain
from treasury.backends.chain.minting import MintingChain
from treasury.backends.chain.rpc import MintingRpcChain, RpcChain
from treasury.backends.fiat.base import FiatContext, FiatProvider, SimulatedProvider
from treasury.backends.fiat.sandbox import SandboxFiat
from treasury.backends.storage.base import Storage


def test_the_chain_interface_knows_nothing_of_minting_or_yield() -> None:
    names = set(dir(Chain))
    assert not names & {"faucet", "can_mint", "post_yield_root", "web3", "minter_key"}
    assert not [n for n in names if "mint" in n.lower() or "yield" in n.lower()]


def test_the_chain_interface_is_the_json_rpc_primitives() -> None:
    assert Chain.__abstractmethods__ == {
        "from_config",
        "call",
        "calls_at",
        "receipts",
        "logs",
        "head",
        "blocks",
        "send_raw_transaction",
        "pending_nonce",
        "mined_nonce",
        "fee_fields",
        "estimate_gas",
    }


def test_test_chains_are_told_apart_by_their_own_interface() -> None:
    """The devnet and a node configured with a minter key mint; a plain node does not."""
    members = ("faucet", "minter_key")
    assert set(members) <= set(dir(MintingChain))
    assert all(hasattr(DevnetChain, m) and hasattr(MintingRpcChain, m) for m in members)
    assert not any(hasattr(RpcChain, m) for m in members)
    assert (DevnetChain.confirmations, MintingRpcChain.confirmations, RpcChain.confirmations) == (
        0,
        0,
        12,
    )


def test_fiat_reads_and_steps_are_apart() -> None:
    """Stepping time is the simulated provider's own interface, not the provider's."""
    assert not hasattr(FiatProvider, "advance")
    assert isinstance(SandboxFiat(), SimulatedProvider)
    # the interface names Chain and Storage for type checkers only (the typed client,
    # which reads its models, loads no storage)
    hints = typing.get_type_hints(FiatContext, localns={"Chain": Chain, "Storage": Storage})
    assert typing.get_args(hints["chain"]) == ([int], Chain)
