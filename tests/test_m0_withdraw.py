"""Deposits and withdrawals through the library on M0's real `SwapFacility`.

The fixture's contracts (`treasury.testing.m0.deploy_m0`: a JMI extension as a 6-decimal
c0) on anvil, configured as a JSON-RPC chain by their addresses with the exit path
``replace_asset_with_m``: transfers signed by the library, and prepared steps signed by
the test, move exact amounts; c0 goes back to USDC by ``replaceAssetWithM`` within c0's
M float. Needs the anvil binary of ``npm ci`` (or ``TREASURY_ANVIL``): skipped without
it, except under ``CI``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib.resources import files
from typing import Any

import pytest
from web3 import Web3

from treasury import Treasury
from treasury.anvil import AnvilNode, start_anvil
from treasury.errors import ValidationError
from treasury.evm.abi import REPLACE_ASSET_WITH_M, SWAP
from treasury.evm.facility import REPLACE_GAS, SWAP_GAS
from treasury.testing.m0 import ADMIN, M0Deployment, deploy_m0

from .conftest import MASTER_KEY, make_tenant, require_anvil
from .helpers import address, swap

CHAIN = 31337
DEPOSIT = 1_000_000_001  # 1,000.000001 USDC: the sixth decimal must survive both ways
WITHDRAWAL = 400_000_001
FLOAT = 600_000_000  # M in c0 beyond its USDC: the most one exit can take


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    require_anvil()
    with start_anvil() as node:
        yield node


@pytest.fixture(scope="module")
def deployment(node: AnvilNode) -> M0Deployment:
    return deploy_m0(node.url)


@pytest.fixture(scope="module")
def multicall(deployment: M0Deployment) -> str:
    """Our Multicall3 build, deployed beside M0's contracts (balances and reads use it)."""
    artifacts = json.loads(files("treasury.contracts").joinpath("artifacts.json").read_text())
    bytecode = artifacts["contracts"]["Multicall3"]["bytecode"]
    tx_hash = deployment.w3.eth.send_transaction({"from": ADMIN, "data": bytecode})
    receipt = deployment.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
    return str(receipt["contractAddress"])


@pytest.fixture
def m0(deployment: M0Deployment) -> Iterator[M0Deployment]:
    """The deployment, each test's changes undone after it (an anvil snapshot)."""
    snapshot = deployment.w3.provider.make_request("evm_snapshot", [])["result"]
    yield deployment
    deployment.w3.provider.make_request("evm_revert", [snapshot])


@pytest.fixture
def t(storage_url: str, node: AnvilNode, m0: M0Deployment, multicall: str) -> Iterator[Treasury]:
    config = {
        "url": node.url,
        "addresses": {
            "USDC": m0.usdc,
            "c0": m0.c0,
            "swap_facility": m0.swap_facility,
            "earner_rate_source": m0.m_token,
            "multicall": multicall,
        },
        "exit_path": "replace_asset_with_m",
        "confirmations": 0,  # anvil mines on demand: a receipt is final here
    }
    treasury = Treasury.open(storage_url, master_key=MASTER_KEY, chains={CHAIN: config})
    yield treasury
    treasury.close()


def checksummed(value: str) -> str:
    """web3.py takes checksummed addresses only; the library answers lowercase ones."""
    return str(Web3.to_checksum_address(value))


def usdc(m0: M0Deployment, owner: str) -> int:
    balance: int = m0.usdc_token.functions.balanceOf(checksummed(owner)).call()
    return balance


def c0(m0: M0Deployment, owner: str) -> int:
    balance: int = m0.c0_token.functions.balanceOf(checksummed(owner)).call()
    return balance


def finish(t: Treasury, org: Any, transfer_id: str) -> Any:
    for _ in range(5):
        t.run_once()
        transfer = org.transfers.get(transfer_id)
        if transfer.status in ("completed", "failed"):
            return transfer
    return transfer


def test_a_deposit_and_a_withdrawal_complete_with_exact_amounts(
    t: Treasury, m0: M0Deployment
) -> None:
    org = make_tenant(t).org
    wallet = checksummed(org.wallets.create(label="Ops").address)
    recipient = address()
    m0.w3.provider.make_request("anvil_setBalance", [wallet, hex(10**18)])
    m0.mint_usdc(wallet, DEPOSIT)

    deposit = org.transfers.create(swap("deposit", wallet, wallet, "1000.000001"))
    assert finish(t, org, deposit.id).status == "completed"
    assert (usdc(m0, wallet), c0(m0, wallet)) == (0, DEPOSIT)

    m0.seed_m_backing(FLOAT)
    withdrawal = org.transfers.create(swap("withdraw", wallet, recipient, "400.000001"))
    done = finish(t, org, withdrawal.id)
    assert done.status == "completed"
    assert (done.from_.amount, done.to.amount) == ("400.000001", "400.000001")
    assert usdc(m0, recipient) == WITHDRAWAL
    assert c0(m0, wallet) == DEPOSIT - WITHDRAWAL
    assert m0.c0_token.functions.assetBalanceOf(m0.usdc).call() == DEPOSIT - WITHDRAWAL
    assert m0.m.functions.balanceOf(m0.c0).call() == FLOAT  # the float is given back
    receipt = m0.w3.eth.get_transaction(done.transaction_hash)
    assert receipt["to"].lower() == m0.swap_facility.lower()
    assert (
        bytes(receipt["input"])[:4]
        == REPLACE_ASSET_WITH_M.encode(m0.usdc, m0.c0, m0.c0, WITHDRAWAL, recipient)[:4]
    )
    kinds = [tx.type for tx in org.transactions.list(CHAIN).data]
    assert sorted(kinds) == ["approval", "approval", "deposit", "withdrawal"]


def test_a_withdrawal_beyond_c0s_float_is_refused_before_anything_is_signed(
    t: Treasury, m0: M0Deployment
) -> None:
    org = make_tenant(t).org
    wallet = checksummed(org.wallets.create(label="Ops").address)
    m0.w3.provider.make_request("anvil_setBalance", [wallet, hex(10**18)])
    m0.mint_usdc(wallet, DEPOSIT)
    deposit = org.transfers.create(swap("deposit", wallet, wallet, "1000.000001"))
    assert finish(t, org, deposit.id).status == "completed"

    with pytest.raises(ValidationError, match="no M float"):
        org.transfers.create(swap("withdraw", wallet, wallet, "1"))
    m0.seed_m_backing(FLOAT)
    with pytest.raises(ValidationError, match="at most 600 c0 be exchanged back at once"):
        org.transfers.create(swap("withdraw", wallet, wallet, "600.000001"))
    assert [tr.id for tr in org.transfers.list().data] == [deposit.id]


def send_steps(m0: M0Deployment, sender: str, steps: list[Any]) -> list[int]:
    """Sign and send each prepared step from `sender` (unlocked on anvil): gas used."""
    used = []
    for step in steps:
        to, data = checksummed(step.transaction.to), step.transaction.data
        tx = {"from": sender, "to": to, "data": data}
        tx_hash = m0.w3.eth.send_transaction(tx)
        receipt = m0.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30, poll_latency=0.05)
        assert receipt["status"] == 1, step.description
        used.append(receipt["gasUsed"])
    return used


def test_prepared_steps_deposit_and_withdraw_exactly_split_within_the_float(
    t: Treasury, m0: M0Deployment
) -> None:
    org = make_tenant(t).org
    user, recipient = m0.w3.eth.accounts[1], address()
    m0.mint_usdc(user, DEPOSIT)
    body = {"token": "USDC", "amount": "1000.000001", "from": user}

    deposit = org.swaps.prepare_deposit(CHAIN, body)
    assert [s.type for s in deposit.steps] == ["approval", "swap"]
    assert (
        deposit.steps[1].transaction.data == "0x" + SWAP.encode(m0.usdc, m0.c0, DEPOSIT, user).hex()
    )
    _, swap_gas = send_steps(m0, user, deposit.steps)
    assert (usdc(m0, user), c0(m0, user)) == (0, DEPOSIT)
    assert swap_gas < SWAP_GAS  # within the executor's limit for one swap

    m0.seed_m_backing(FLOAT)
    withdraw = org.swaps.prepare_withdraw(CHAIN, {**body, "recipient": recipient})
    assert [s.type for s in withdraw.steps] == ["approval", "swap", "swap"]
    parts = [FLOAT, DEPOSIT - FLOAT]  # the whole amount in two exits within the float
    assert [s.transaction.data for s in withdraw.steps[1:]] == [
        "0x" + REPLACE_ASSET_WITH_M.encode(m0.usdc, m0.c0, m0.c0, part, recipient).hex()
        for part in parts
    ]
    assert "replaceAssetWithM" in withdraw.steps[1].description
    assert (withdraw.summary.amount_in, withdraw.summary.amount_in_raw) == (
        "1000.000001",
        str(DEPOSIT),
    )
    gas = send_steps(m0, user, withdraw.steps)
    assert usdc(m0, recipient) == DEPOSIT
    assert c0(m0, user) == 0
    assert max(gas) < REPLACE_GAS  # within the executor's limit for one exit


def test_prepare_refuses_what_c0_cannot_give_back(t: Treasury, m0: M0Deployment) -> None:
    org = make_tenant(t).org
    user = m0.w3.eth.accounts[1]
    m0.mint_usdc(user, DEPOSIT)
    send_steps(
        m0,
        user,
        org.swaps.prepare_deposit(
            CHAIN, {"token": "USDC", "amount": "1000.000001", "from": user}
        ).steps,
    )
    body = {"token": "USDC", "amount": "1", "from": user}
    with pytest.raises(ValidationError, match="c0 has no M float"):
        org.swaps.prepare_withdraw(CHAIN, body)
    m0.seed_m_backing(FLOAT)
    with pytest.raises(ValidationError, match=r"c0 holds 1000\.000001 USDC"):
        org.swaps.prepare_withdraw(CHAIN, {**body, "amount": "1000.000002"})
    m0.seed_m_backing(1)  # one raw unit more of float: 600.000001 per exit
    assert len(org.swaps.prepare_withdraw(CHAIN, {**body, "amount": "1000"}).steps) == 3
