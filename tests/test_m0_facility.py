"""M0's real `SwapFacility` with a JMI extension as a 6-decimal c0, on anvil.

The contracts are compiled from m0-foundation's sources (``tests/fixtures/m0/``) and
deployed by `treasury.testing.m0.deploy_m0`. Shown at the contract level: a deposit
(USDC -> c0 through `swap`) and the exit (`replaceAssetWithM`) move exact raw amounts;
the direct c0 -> USDC `swap` is refused with `InvalidSwapPath`. Needs the anvil binary of
``npm ci`` (or ``TREASURY_ANVIL``): skipped without it, except under ``CI``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from web3.exceptions import ContractCustomError

from treasury.anvil import AnvilNode, start_anvil
from treasury.testing.m0 import M0Deployment, deploy_m0, error_data

from .conftest import require_anvil

#: 1,000.000001 USDC: the last of six decimals must survive both ways.
DEPOSIT = 1_000_000_001
WITHDRAWAL = 400_000_001
FLOAT = 600_000_000  # M an M holder puts into c0 so that c0 can be unwrapped


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    require_anvil()
    with start_anvil() as node:
        yield node


@pytest.fixture(scope="module")
def deployment(node: AnvilNode) -> M0Deployment:
    return deploy_m0(node.url)


@pytest.fixture
def m0(deployment: M0Deployment) -> Iterator[M0Deployment]:
    """The deployment, each test's changes undone after it (an anvil snapshot)."""
    snapshot = deployment.w3.provider.make_request("evm_snapshot", [])["result"]
    yield deployment
    deployment.w3.provider.make_request("evm_revert", [snapshot])


@pytest.fixture
def user(m0: M0Deployment) -> str:
    """Anvil's second dev account, holding `DEPOSIT` c0 bought with as much USDC."""
    account: str = m0.w3.eth.accounts[1]
    m0.mint_usdc(account, DEPOSIT)
    m0.transact(m0.usdc_token.functions.approve(m0.swap_facility, DEPOSIT), account)
    m0.transact(m0.facility.functions.swap(m0.usdc, m0.c0, DEPOSIT, account), account)
    return account


def revert_data(call: Any, sender: str) -> str:
    """The custom error `call` reverts with when sent by `sender`."""
    with pytest.raises(ContractCustomError) as raised:
        call.call({"from": sender})
    data: str = raised.value.data
    return data


def test_c0_is_a_jmi_extension_with_6_decimals(m0: M0Deployment) -> None:
    c0 = m0.c0_token.functions
    assert (c0.symbol().call(), c0.decimals().call(), c0.M_DECIMALS().call()) == ("c0", 6, 6)
    assert m0.usdc_token.functions.decimals().call() == 6
    assert m0.facility.functions.isApprovedExtension(m0.c0).call()
    assert c0.isAllowedAsset(m0.usdc).call()


def test_a_deposit_swaps_usdc_into_c0_exactly(m0: M0Deployment, user: str) -> None:
    assert m0.c0_token.functions.balanceOf(user).call() == DEPOSIT
    assert m0.usdc_token.functions.balanceOf(user).call() == 0
    assert m0.usdc_token.functions.balanceOf(m0.c0).call() == DEPOSIT
    assert m0.c0_token.functions.assetBalanceOf(m0.usdc).call() == DEPOSIT
    assert m0.c0_token.functions.totalAssets().call() == DEPOSIT
    assert m0.facility.functions.canSwapViaPath(user, m0.usdc, m0.c0).call()


def test_c0_to_usdc_by_swap_is_an_invalid_path(m0: M0Deployment, user: str) -> None:
    m0.transact(m0.c0_token.functions.approve(m0.swap_facility, WITHDRAWAL), user)
    call = m0.facility.functions.swap(m0.c0, m0.usdc, WITHDRAWAL, user)
    expected = error_data(m0.facility.abi, "InvalidSwapPath", m0.c0, m0.usdc)
    assert revert_data(call, user) == expected.lower()
    assert not m0.facility.functions.canSwapViaPath(user, m0.c0, m0.usdc).call()


def test_the_exit_needs_m_in_c0_beyond_its_usdc(m0: M0Deployment, user: str) -> None:
    m0.transact(m0.c0_token.functions.approve(m0.swap_facility, WITHDRAWAL), user)
    call = m0.facility.functions.replaceAssetWithM(m0.usdc, m0.c0, m0.c0, WITHDRAWAL, user)
    expected = error_data(m0.c0_token.abi, "InsufficientMBacking", WITHDRAWAL, 0)
    assert revert_data(call, user) == expected.lower()
    assert not m0.c0_token.functions.isAllowedToUnwrap(WITHDRAWAL).call()


def test_the_exit_replaces_usdc_with_m_exactly(m0: M0Deployment, user: str) -> None:
    m0.seed_m_backing(FLOAT)
    recipient = m0.w3.eth.accounts[2]
    m0.transact(m0.c0_token.functions.approve(m0.swap_facility, WITHDRAWAL), user)
    exit_call = m0.facility.functions.replaceAssetWithM(
        m0.usdc, m0.c0, m0.c0, WITHDRAWAL, recipient
    )
    m0.transact(exit_call, user)

    assert m0.usdc_token.functions.balanceOf(recipient).call() == WITHDRAWAL
    assert m0.c0_token.functions.balanceOf(user).call() == DEPOSIT - WITHDRAWAL
    assert m0.usdc_token.functions.balanceOf(m0.c0).call() == DEPOSIT - WITHDRAWAL
    assert m0.c0_token.functions.assetBalanceOf(m0.usdc).call() == DEPOSIT - WITHDRAWAL
    # The float of M is given back, not spent: c0 holds it and its backing is unchanged.
    assert m0.m.functions.balanceOf(m0.c0).call() == FLOAT
    assert m0.c0_token.functions.totalSupply().call() == FLOAT + DEPOSIT - WITHDRAWAL
    assert m0.c0_token.functions.isAllowedToUnwrap(FLOAT).call()


def test_one_exit_is_bounded_by_the_float_and_by_c0s_usdc(m0: M0Deployment, user: str) -> None:
    m0.seed_m_backing(FLOAT)
    c0, facility = m0.c0_token.functions, m0.facility.functions
    m0.transact(c0.approve(m0.swap_facility, DEPOSIT), user)
    over_float = facility.replaceAssetWithM(m0.usdc, m0.c0, m0.c0, FLOAT + 1, user)
    expected = error_data(m0.c0_token.abi, "InsufficientMBacking", FLOAT + 1, FLOAT)
    assert revert_data(over_float, user) == expected.lower()

    # Two exits within the float take all of the user's USDC back.
    rest = DEPOSIT - FLOAT
    m0.transact(facility.replaceAssetWithM(m0.usdc, m0.c0, m0.c0, FLOAT, user), user)
    m0.transact(facility.replaceAssetWithM(m0.usdc, m0.c0, m0.c0, rest, user), user)
    assert m0.usdc_token.functions.balanceOf(user).call() == DEPOSIT
    assert c0.balanceOf(user).call() == 0
    assert c0.assetBalanceOf(m0.usdc).call() == 0

    # With no USDC left in c0, the holder of the float cannot take USDC out.
    m0.transact(c0.approve(m0.swap_facility, 1))
    past_usdc = facility.replaceAssetWithM(m0.usdc, m0.c0, m0.c0, 1, m0.w3.eth.accounts[0])
    expected = error_data(m0.c0_token.abi, "InsufficientAssetBacking", m0.usdc, 1, 0)
    assert revert_data(past_usdc, m0.w3.eth.accounts[0]) == expected.lower()
