"""Deploy the committed contract artifacts on the in-process devnet's EVM (revm) and
exercise them through web3, as a user of `dev.web3` would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from eth_abi import decode
from web3 import Web3
from web3.exceptions import ContractLogicError
from web3.logs import DISCARD

from treasury.backends.chain.devnet import DevnetChain

ARTIFACTS = Path(__file__).resolve().parent.parent / "treasury" / "contracts" / "artifacts.json"
CONTRACTS: dict[str, dict[str, Any]] = json.loads(ARTIFACTS.read_text(encoding="utf-8"))[
    "contracts"
]

USDC = 10**6  # one whole stablecoin


@dataclass
class Chain:
    w3: Web3
    owner: str
    alice: str
    bob: str
    usdc: Any
    usdt: Any
    c0: Any
    facility: Any
    rate: Any
    multicall: Any
    places: int  # c0's decimals

    @property
    def scale(self) -> int:
        """c0 base units per stablecoin base unit."""
        return 10 ** (self.places - 6)


def _send(fn: Any, sender: str) -> Any:
    receipt = fn.w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender}))
    assert receipt["status"] == 1
    return receipt


def _reverts(fn: Any, sender: str, reason: str) -> None:
    # the gas estimate reverts: web3 raises ContractLogicError with the reason
    with pytest.raises(ContractLogicError, match=reason):
        fn.transact({"from": sender})


def _deploy(w3: Web3, name: str, *args: Any, sender: str) -> Any:
    factory = w3.eth.contract(abi=CONTRACTS[name]["abi"], bytecode=CONTRACTS[name]["bytecode"])
    receipt = w3.eth.wait_for_transaction_receipt(
        factory.constructor(*args).transact({"from": sender})
    )
    assert receipt["status"] == 1
    return w3.eth.contract(address=receipt["contractAddress"], abi=CONTRACTS[name]["abi"])


@pytest.fixture(params=[18, 6], ids=["c0-18", "c0-6"])
def chain(request: pytest.FixtureRequest) -> Chain:
    """Our contracts with a c0 of 18 decimals (the devnet's default) or 6 (M0's)."""
    w3 = DevnetChain().web3  # a chain of its own, in memory
    owner, alice, bob = w3.eth.accounts[:3]
    usdc = _deploy(w3, "TestStablecoin", "USD Coin", "USDC", sender=owner)
    usdt = _deploy(w3, "TestTetherToken", "Tether USD", "USDT", sender=owner)
    c0 = _deploy(w3, "C0Token", request.param, sender=owner)
    facility = _deploy(w3, "SwapFacility", c0.address, usdc.address, usdt.address, sender=owner)
    _send(c0.functions.setMinter(facility.address, True), owner)
    rate = _deploy(w3, "EarnerRateSource", 415, sender=owner)
    multicall = _deploy(w3, "Multicall3", sender=owner)
    return Chain(w3, owner, alice, bob, usdc, usdt, c0, facility, rate, multicall, request.param)


def test_token_metadata(chain: Chain) -> None:
    assert chain.usdc.functions.decimals().call() == 6
    assert chain.usdc.functions.symbol().call() == "USDC"
    assert chain.usdc.functions.name().call() == "USD Coin"
    assert chain.usdt.functions.decimals().call() == 6
    assert chain.usdt.functions.symbol().call() == "USDT"
    assert chain.c0.functions.decimals().call() == chain.places
    assert chain.c0.functions.symbol().call() == "c0"
    assert chain.facility.functions.c0().call() == chain.c0.address
    assert chain.facility.functions.usdc().call() == chain.usdc.address
    assert chain.facility.functions.usdt().call() == chain.usdt.address
    facility, usdc, usdt = chain.facility, chain.usdc.address, chain.usdt.address
    assert facility.functions.usdcScale().call() == chain.scale  # read from the tokens
    assert facility.functions.usdtScale().call() == chain.scale
    assert facility.functions.scale(usdc).call() == facility.functions.scale(usdt).call()
    with pytest.raises(ContractLogicError, match="not a stablecoin"):
        facility.functions.scale(chain.c0.address).call()


def test_a_c0_with_fewer_decimals_than_a_stablecoin_is_refused() -> None:
    w3 = DevnetChain().web3
    owner = w3.eth.accounts[0]
    usdc = _deploy(w3, "TestStablecoin", "USD Coin", "USDC", sender=owner)
    usdt = _deploy(w3, "TestTetherToken", "Tether USD", "USDT", sender=owner)
    c0 = _deploy(w3, "C0Token", 2, sender=owner)
    factory = w3.eth.contract(
        abi=CONTRACTS["SwapFacility"]["abi"], bytecode=CONTRACTS["SwapFacility"]["bytecode"]
    )
    with pytest.raises(ContractLogicError, match="c0 has fewer decimals than a stablecoin"):
        factory.constructor(c0.address, usdc.address, usdt.address).transact({"from": owner})


def test_mint_permissions(chain: Chain) -> None:
    usdc, owner, alice, bob = chain.usdc, chain.owner, chain.alice, chain.bob
    receipt = _send(usdc.functions.mint(alice, 5 * USDC), owner)
    (event,) = usdc.events.Transfer().process_receipt(receipt, errors=DISCARD)
    assert event["args"]["to"] == alice and event["args"]["value"] == 5 * USDC
    assert usdc.functions.balanceOf(alice).call() == 5 * USDC
    assert usdc.functions.totalSupply().call() == 5 * USDC

    _reverts(usdc.functions.mint(bob, 1), alice, "not a minter")
    _reverts(usdc.functions.setMinter(alice, True), alice, "not the owner")
    _send(usdc.functions.setMinter(alice, True), owner)
    assert usdc.functions.isMinter(alice).call()
    _send(usdc.functions.mint(bob, 7), alice)
    assert usdc.functions.balanceOf(bob).call() == 7
    _send(usdc.functions.setMinter(alice, False), owner)
    _reverts(usdc.functions.mint(bob, 1), alice, "not a minter")

    # c0: the owner may mint (faucet); only minters may burn.
    _send(chain.c0.functions.mint(alice, 3 * chain.scale), owner)
    assert chain.c0.functions.balanceOf(alice).call() == 3 * chain.scale
    _reverts(chain.c0.functions.mint(alice, 1), alice, "not a minter")
    _reverts(chain.c0.functions.burn(1), owner, "C0: caller is not a minter")
    _reverts(chain.c0.functions.burn(1), alice, "C0: caller is not a minter")


def test_erc20_transfer_and_allowance(chain: Chain) -> None:
    usdc, alice, bob = chain.usdc, chain.alice, chain.bob
    _send(usdc.functions.mint(alice, 10 * USDC), chain.owner)
    assert usdc.functions.transfer(bob, USDC).call({"from": alice}) is True
    _send(usdc.functions.transfer(bob, USDC), alice)
    assert usdc.functions.balanceOf(bob).call() == USDC
    _reverts(usdc.functions.transfer(bob, 100 * USDC), alice, "exceeds balance")
    _reverts(usdc.functions.transferFrom(alice, bob, 1), bob, "insufficient allowance")
    _send(usdc.functions.approve(bob, 2 * USDC), alice)
    _send(usdc.functions.approve(bob, 3 * USDC), alice)  # plain ERC-20: no USDT rule
    _send(usdc.functions.transferFrom(alice, bob, USDC), bob)
    assert usdc.functions.allowance(alice, bob).call() == 2 * USDC
    assert usdc.functions.balanceOf(bob).call() == 2 * USDC


def test_deposit_and_withdraw_usdc(chain: Chain) -> None:
    usdc, c0, facility, alice, bob = chain.usdc, chain.c0, chain.facility, chain.alice, chain.bob
    amount = 1_234_567_891  # 1234.567891 USDC
    _send(usdc.functions.mint(alice, amount), chain.owner)

    # deposit: USDC -> c0, minted to a different recipient
    _send(usdc.functions.approve(facility.address, amount), alice)
    swap = facility.functions.swap(usdc.address, c0.address, amount, bob)
    assert swap.call({"from": alice}) == amount * chain.scale
    receipt = _send(swap, alice)
    assert c0.functions.balanceOf(bob).call() == amount * chain.scale
    assert c0.functions.totalSupply().call() == amount * chain.scale
    assert usdc.functions.balanceOf(alice).call() == 0
    assert usdc.functions.balanceOf(facility.address).call() == amount
    (event,) = facility.events.Swap().process_receipt(receipt, errors=DISCARD)
    assert dict(event["args"]) == {
        "sender": alice,
        "recipient": bob,
        "tokenIn": usdc.address,
        "tokenOut": c0.address,
        "amountIn": amount,
        "amountOut": amount * chain.scale,
    }

    # withdrawal without approving c0 first fails
    _reverts(
        facility.functions.swap(c0.address, usdc.address, amount * chain.scale, bob),
        bob,
        "insufficient allowance",
    )

    # withdrawal: c0 -> USDC, in two parts
    part = 1_000 * USDC
    _send(c0.functions.approve(facility.address, amount * chain.scale), bob)
    _send(facility.functions.swap(c0.address, usdc.address, part * chain.scale, alice), bob)
    assert usdc.functions.balanceOf(alice).call() == part
    receipt = _send(
        facility.functions.swap(c0.address, usdc.address, (amount - part) * chain.scale, bob), bob
    )
    (event,) = facility.events.Swap().process_receipt(receipt, errors=DISCARD)
    assert event["args"]["amountIn"] == (amount - part) * chain.scale
    assert event["args"]["amountOut"] == amount - part
    assert usdc.functions.balanceOf(bob).call() == amount - part
    assert c0.functions.balanceOf(bob).call() == 0
    assert c0.functions.totalSupply().call() == 0
    assert c0.functions.allowance(bob, facility.address).call() == 0
    assert usdc.functions.balanceOf(facility.address).call() == 0


def test_usdt_approve_rule_and_deposit(chain: Chain) -> None:
    usdt, c0, facility, alice = chain.usdt, chain.c0, chain.facility, chain.alice
    spender = facility.address
    _send(usdt.functions.mint(alice, 50 * USDC), chain.owner)

    _send(usdt.functions.approve(spender, 10 * USDC), alice)
    _reverts(usdt.functions.approve(spender, 20 * USDC), alice, "non-zero to non-zero")
    assert usdt.functions.allowance(alice, spender).call() == 10 * USDC
    _send(usdt.functions.approve(spender, 0), alice)
    _send(usdt.functions.approve(spender, 0), alice)  # zero -> zero is fine too
    _send(usdt.functions.approve(spender, 20 * USDC), alice)
    assert usdt.functions.allowance(alice, spender).call() == 20 * USDC

    _send(facility.functions.swap(usdt.address, c0.address, 20 * USDC, alice), alice)
    assert c0.functions.balanceOf(alice).call() == 20 * USDC * chain.scale
    assert usdt.functions.allowance(alice, spender).call() == 0
    # allowance is back to zero, so a fresh non-zero approve works again
    _send(usdt.functions.approve(spender, 5 * USDC), alice)

    _send(c0.functions.approve(spender, 20 * USDC * chain.scale), alice)
    _send(facility.functions.swap(c0.address, usdt.address, 20 * USDC * chain.scale, alice), alice)
    assert usdt.functions.balanceOf(alice).call() == 50 * USDC


def test_swap_rejections(chain: Chain) -> None:
    usdc, usdt, c0, facility = chain.usdc, chain.usdt, chain.c0, chain.facility
    alice, bob = chain.alice, chain.bob
    _send(usdc.functions.mint(alice, 10 * USDC), chain.owner)
    _send(usdc.functions.approve(facility.address, 10 * USDC), alice)
    _send(facility.functions.swap(usdc.address, c0.address, 10 * USDC, alice), alice)
    _send(c0.functions.approve(facility.address, 2**256 - 1), alice)

    def swap(token_in: Any, token_out: Any, amount: int) -> Any:
        return facility.functions.swap(token_in.address, token_out.address, amount, alice)

    if chain.scale > 1:  # a c0 finer than the stablecoin: amounts it cannot pay out
        _reverts(swap(c0, usdc, chain.scale + 1), alice, "SwapFacility: dust")
        _reverts(swap(c0, usdc, chain.scale // 2), alice, "SwapFacility: dust")
    _reverts(swap(c0, usdc, 0), alice, "SwapFacility: zero amount")
    _reverts(swap(usdc, c0, 0), alice, "SwapFacility: zero amount")
    _reverts(swap(usdc, usdt, 1), alice, "SwapFacility: unsupported pair")
    _reverts(swap(c0, c0, chain.scale), alice, "SwapFacility: unsupported pair")
    _reverts(swap(chain.rate, c0, 1), alice, "SwapFacility: unsupported pair")
    _reverts(
        facility.functions.swap(usdc.address, c0.address, 1, "0x" + "00" * 20),
        alice,
        "SwapFacility: zero recipient",
    )
    # reserves hold 10 USDC and no USDT
    _reverts(swap(c0, usdt, chain.scale), alice, "SwapFacility: insufficient reserves")
    _send(c0.functions.mint(alice, 5 * USDC * chain.scale), chain.owner)  # faucet c0, unbacked
    _reverts(swap(c0, usdc, 11 * USDC * chain.scale), alice, "SwapFacility: insufficient reserves")
    # a deposit needs the stablecoin allowance
    _send(usdc.functions.mint(bob, USDC), chain.owner)
    _reverts(
        facility.functions.swap(usdc.address, c0.address, USDC, bob), bob, "insufficient allowance"
    )
    # nothing above moved any funds
    assert c0.functions.balanceOf(alice).call() == 15 * USDC * chain.scale
    assert usdc.functions.balanceOf(facility.address).call() == 10 * USDC


def test_earner_rate(chain: Chain) -> None:
    rate = chain.rate
    assert rate.functions.earnerRate().call() == 415
    assert rate.functions.owner().call() == chain.owner
    receipt = _send(rate.functions.setEarnerRate(512), chain.owner)
    (event,) = rate.events.EarnerRateSet().process_receipt(receipt, errors=DISCARD)
    assert (event["args"]["previousRate"], event["args"]["newRate"]) == (415, 512)
    assert rate.functions.earnerRate().call() == 512
    _reverts(rate.functions.setEarnerRate(1), chain.alice, "not the owner")
    assert rate.functions.earnerRate().call() == 512


def test_multicall_aggregate3(chain: Chain) -> None:
    usdc, usdt, c0, mc, alice = chain.usdc, chain.usdt, chain.c0, chain.multicall, chain.alice
    _send(usdc.functions.mint(alice, 11), chain.owner)
    _send(usdt.functions.mint(alice, 22), chain.owner)
    _send(c0.functions.mint(alice, 33 * chain.scale), chain.owner)

    calls = [
        (token.address, False, token.encode_abi("balanceOf", args=[alice]))
        for token in (usdc, usdt, c0)
    ]
    # a failing call (the multicall is not the owner) is tolerated with allowFailure
    failing = (chain.rate.address, True, chain.rate.encode_abi("setEarnerRate", args=[1]))
    results = mc.functions.aggregate3([*calls, failing]).call()

    assert len(results) == 4
    assert [ok for ok, _ in results] == [True, True, True, False]
    balances = [decode(["uint256"], data)[0] for _, data in results[:3]]
    assert balances == [11, 22, 33 * chain.scale]
    # the failing call's return data is the Error(string) revert payload
    assert results[3][1][:4] == bytes.fromhex("08c379a0")
    assert b"not the owner" in results[3][1]

    with pytest.raises(ContractLogicError, match="Multicall3: call failed"):
        mc.functions.aggregate3([*calls, (failing[0], False, failing[2])]).call()

    block = chain.w3.eth.block_number
    assert mc.functions.getBlockNumber().call() in (block, block + 1)
    assert mc.functions.getEthBalance(alice).call() == chain.w3.eth.get_balance(alice)
    assert mc.functions.getChainId().call() == chain.w3.eth.chain_id
