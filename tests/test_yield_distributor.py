"""The YieldDistributor contract on the in-process devnet: the operator posts a period's
root once; a holder claims with its proof (OpenZeppelin standard-v1 leaves, sorted-pair
hashing, checked here with the test's own keccak code) and receives exactly its amount,
once."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account import Account
from web3.exceptions import ContractLogicError

from treasury.backends.chain.devnet import DevnetChain
from treasury.evm.abi import BALANCE_OF, calldata
from treasury.money import to_units
from treasury.yields.publication import post_root

from .helpers import claim_leaf, sorted_pair

PERIOD = 2917
CLAIM = "claim(uint256,uint256,address,uint256,bytes32[])"


@pytest.fixture(scope="module")
def devnet() -> DevnetChain:
    return DevnetChain()


def send(chain: Any, sender: Any, to: str, data: bytes) -> Any:
    w3 = chain.web3
    tx = {
        "to": w3.to_checksum_address(to),
        "data": "0x" + data.hex(),
        "gas": 300_000,
        "nonce": w3.eth.get_transaction_count(sender.address, "pending"),
        "chainId": 31337,
        **chain.fee_fields(),
    }
    raw = sender.sign_transaction(tx).raw_transaction
    return w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(raw))


def call(chain: DevnetChain, to: str, data: bytes) -> bytes:
    return bytes(chain.web3.eth.call({"to": chain.web3.to_checksum_address(to), "data": data}))


def test_a_holder_claims_its_amount_once_with_its_proof(devnet):
    distributor, c0 = devnet.addresses["yield_distributor"], devnet.addresses["c0"]
    holders = [Account.create() for _ in range(3)]
    for holder in holders:
        devnet.faucet(holder.address, "ETH", "1")
    amounts = [7 * 10**15, 123_456_789, 10**18]
    accounts = sorted(h.address.lower() for h in holders)  # index: ascending account order
    leaves = [claim_leaf(i, a, amounts[i]) for i, a in enumerate(accounts)]
    # three leaves: the root hashes the pair (0, 1) with leaf 2, as any sorted-pair tree
    root = sorted_pair(sorted_pair(leaves[0], leaves[1]), leaves[2])
    proofs = [[leaves[1], leaves[2]], [leaves[0], leaves[2]], [sorted_pair(leaves[0], leaves[1])]]

    total = to_units(sum(amounts), devnet.c0_decimals)  # the period's total, in c0
    devnet.faucet(distributor, "c0", total)  # minted to the contract
    outsider = Account.create()
    devnet.faucet(outsider.address, "ETH", "1")
    post = calldata("postRoot(uint256,bytes32)", PERIOD, root)
    assert send(devnet, outsider, distributor, post)["status"] == 0  # only the operator
    operator = devnet.web3.to_checksum_address(devnet.deployer)  # the operator: the deployer
    devnet.web3.eth.send_transaction(
        {
            "from": operator,
            "to": devnet.web3.to_checksum_address(distributor),
            "data": "0x" + post.hex(),
        }
    )
    assert call(devnet, distributor, calldata("roots(uint256)", PERIOD)) == root

    by_address = {h.address.lower(): h for h in holders}
    index = 1
    claimer = by_address[accounts[index]]
    claim = calldata(CLAIM, PERIOD, index, accounts[index], amounts[index], proofs[index])
    wrong = calldata(CLAIM, PERIOD, index, accounts[index], amounts[index] + 1, proofs[index])
    assert send(devnet, claimer, distributor, wrong)["status"] == 0  # another amount
    assert send(devnet, claimer, distributor, claim)["status"] == 1
    balance = BALANCE_OF.decode(call(devnet, c0, BALANCE_OF.encode(accounts[index])))[0]
    assert balance == amounts[index]
    assert send(devnet, claimer, distributor, claim)["status"] == 0  # never twice
    claimed = calldata("isClaimed(uint256,uint256)", PERIOD, index)
    assert call(devnet, distributor, claimed)[-1] == 1
    # anyone may send a holder's claim; the amount still goes to the holder
    other = calldata(CLAIM, PERIOD, 2, accounts[2], amounts[2], proofs[2])
    assert send(devnet, outsider, distributor, other)["status"] == 1
    assert BALANCE_OF.decode(call(devnet, c0, BALANCE_OF.encode(accounts[2])))[0] == amounts[2]
    with pytest.raises(ContractLogicError, match="root already posted"):
        devnet.web3.eth.call(
            {
                "from": operator,
                "to": devnet.web3.to_checksum_address(distributor),
                "data": "0x" + post.hex(),
            }
        )


def post_and_claim(chain: Any) -> None:
    """`post_root` (the yields domain, with the test chain's key) funds the distributor
    and posts a one-leaf root; the holder claims exactly its amount; posting it again
    sends nothing."""
    holder = Account.create()
    chain.faucet(holder.address, "ETH", "1")
    distributor, c0 = chain.addresses["yield_distributor"], chain.addresses["c0"]
    amount, period = 4_200_000_000_000, 3001
    root = claim_leaf(0, holder.address.lower(), amount)  # one leaf: the root, an empty proof
    before = BALANCE_OF.decode(call_on(chain, c0, BALANCE_OF.encode(distributor)))[0]
    assert post_root(chain, period, "0x" + root.hex(), amount)
    assert call_on(chain, distributor, calldata("roots(uint256)", period)) == root
    assert post_root(chain, period, "0x" + root.hex(), amount) == ""
    after = BALANCE_OF.decode(call_on(chain, c0, BALANCE_OF.encode(distributor)))[0]
    assert after - before == amount
    claim = calldata(CLAIM, period, 0, holder.address.lower(), amount, [])
    assert send(chain, holder, distributor, claim)["status"] == 1
    assert BALANCE_OF.decode(call_on(chain, c0, BALANCE_OF.encode(holder.address)))[0] == amount


def call_on(chain: Any, to: str, data: bytes) -> bytes:
    return chain.call(to, data)


def test_the_devnet_posts_a_root_with_its_total(devnet):
    post_and_claim(devnet)


def test_anvil_with_a_minter_key_posts_a_root_with_its_total(anvil_config):
    from treasury.backends.chain import ChainConfig
    from treasury.backends.chain.rpc import RpcChain

    chain = RpcChain.from_config(ChainConfig.parse(31337, anvil_config))
    plain = RpcChain.from_config(ChainConfig.parse(31337, {**anvil_config, "minter_key": None}))
    try:
        post_and_claim(chain)
        assert post_root(plain, 1, "0x" + "1" * 64, 1) is None  # no key: not ours to post
    finally:
        chain.close()
        plain.close()


def test_a_key_that_does_not_operate_the_distributor_posts_nothing(anvil_config):
    """A minter key is not enough: the distributor's operator() must be its address."""
    from treasury.backends.chain import ChainConfig
    from treasury.backends.chain.rpc import RpcChain

    other = {**anvil_config, "minter_key": Account.create().key.hex()}
    chain = RpcChain.from_config(ChainConfig.parse(31337, other))
    try:
        assert post_root(chain, 1, "0x" + "1" * 64, 1) is None
    finally:
        chain.close()
