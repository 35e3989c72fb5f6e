"""The chain can go back: finality, reorgs, stuck legs re-priced, fee caps and gas, on a
real anvil (DESIGN §3 "The chain can go back"). The in-process devnet never reorganises:
every test here runs on anvil, which reorganises (`anvil_reorg`, `evm_revert`), spikes
fees (`anvil_setNextBlockBaseFeePerGas`) and mines on demand (`evm_setAutomine`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.conftest import MASTER_KEY, make_tenant
from tests.helpers import events, py_policy, rpc, swap
from treasury import Treasury
from treasury.anvil import AnvilNode, fund
from treasury.errors import ValidationError
from treasury.evm.signing import unsigned

CHAIN = 31337
TRANSFER = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
GWEI = 10**9


class Env:
    def __init__(self, node: AnvilNode, deployed: dict[str, Any], t: Treasury) -> None:
        self.node, self.deployed, self.t = node, deployed, t
        self.tenant = make_tenant(t)
        self.org = self.tenant.org
        self.wallet = self.org.wallets.create(label="Ops", idempotency_key="w").address
        fund(node.url, deployed, self.wallet, "USDC", "100")
        fund(node.url, deployed, self.wallet, "ETH", "1")

    def rpc(self, method: str, *params: Any) -> Any:
        return rpc(self.node.url, method, *params)

    def head(self) -> int:
        return int(self.rpc("eth_blockNumber"), 16)

    def mine(self, blocks: int = 1, base_fee: int | None = None) -> None:
        """Mine `blocks` blocks, each with `base_fee` (wei) when given."""
        for _ in range(blocks):
            if base_fee is not None:
                self.rpc("anvil_setNextBlockBaseFeePerGas", hex(base_fee))
            self.rpc("anvil_mine", "0x1")

    def deposit(self, amount: str, key: str) -> Any:
        return self.org.transfers.create(
            swap("deposit", self.wallet, self.wallet, amount), idempotency_key=key
        )

    def transfer_logs(self, token: str, sender: str) -> list[dict[str, Any]]:
        """Every ERC-20 Transfer log of `token` out of `sender`, on the canonical chain."""
        topic = "0x" + sender.lower().removeprefix("0x").rjust(64, "0")
        query = {
            "fromBlock": "0x0",
            "toBlock": "latest",
            "address": self.deployed["addresses"][token],
            "topics": [TRANSFER, topic],
        }
        return list(self.rpc("eth_getLogs", query))


@contextmanager
def opened(
    node: AnvilNode, deployed: dict[str, Any], storage_url: str, **settings: Any
) -> Iterator[Env]:
    """A treasury on the anvil node with these chain settings, an organization and a
    managed wallet holding 100 USDC and 1 ETH."""
    spec = {"url": node.url, "addresses": deployed["addresses"], **settings}
    t = Treasury.open(storage_url, chains={CHAIN: spec}, master_key=MASTER_KEY)
    try:
        yield Env(node, deployed, t)
    finally:
        t.close()


@pytest.fixture
def env(
    node: AnvilNode, deployed: dict[str, Any], storage_url: str, chain_state: None
) -> Iterator[Env]:
    with opened(node, deployed, storage_url, confirmations=3, stuck_after_blocks=2) as made:
        yield made


def max_fee(env: Env, tx_hash: str) -> int:
    found = env.rpc("eth_getTransactionByHash", tx_hash)
    return int(found["maxFeePerGas"], 16)


# -- finality ------------------------------------------------------------------------------


def test_a_leg_counts_only_with_its_confirmations_on_top(env: Env) -> None:
    transfer = env.deposit("5", "f")
    env.t.run_once()
    shown = env.org.transfers.get(transfer.id)
    assert shown.status == "submitted" and shown.waiting_reason == "confirmations"
    (tracked,) = [
        x for x in env.org.transactions.list(CHAIN).data if x.hash == transfer.transaction_hash
    ]
    assert tracked.status == "pending"  # its tracked transaction waits too
    env.mine(3)
    env.t.run_once()
    shown = env.org.transfers.get(transfer.id)
    assert shown.status == "completed" and shown.waiting_reason is None


# -- reorgs --------------------------------------------------------------------------------


def test_a_reorg_inside_the_window_rebroadcasts_the_same_leg_and_completes_once(env: Env) -> None:
    before = env.head()
    transfer = env.deposit("7", "r")
    env.t.run_once()  # the receipt is seen and its block kept; 3 confirmations wanted
    assert env.org.transfers.get(transfer.id).waiting_reason == "confirmations"
    mined_in = env.head()
    env.rpc("anvil_reorg", mined_in - before, [])  # the blocks of both legs replaced
    assert env.rpc("eth_getTransactionReceipt", transfer.transaction_hash) is None
    env.mine(1)
    summary = env.t.run_once()  # the check flags the block, the legs are sent again
    assert summary.counts.get("marks_orphaned", 0) >= 1
    env.mine(3)
    env.t.run_once()
    shown = env.org.transfers.get(transfer.id)
    assert shown.status == "completed"
    assert shown.transaction_hash == transfer.transaction_hash  # the same bytes, the same hash
    moved = [
        log for log in env.transfer_logs("USDC", env.wallet) if int(log["data"], 16) == 7_000_000
    ]
    assert len(moved) == 1  # paid once
    assert [data["id"] for _, data in events(env.t, "transfer.completed")] == [transfer.id]


def test_a_completed_transfer_reorged_out_keeps_its_nonce_and_never_moves_back(
    node: AnvilNode, deployed: dict[str, Any], storage_url: str, chain_state: None
) -> None:
    with opened(node, deployed, storage_url, confirmations=0) as env:
        before = env.head()
        first = env.deposit("3", "a")
        env.t.run_once()
        assert env.org.transfers.get(first.id).status == "completed"
        env.rpc("anvil_rollback", env.head() - before)  # deeper than its 0 confirmations
        assert env.rpc("eth_getTransactionReceipt", first.transaction_hash) is None
        second = env.deposit("4", "b")  # before any pass has seen the reorg
        assert second.transaction_hash != first.transaction_hash
        env.t.run_once()
        env.t.run_once()
        assert env.org.transfers.get(first.id).status == "completed"  # never backwards
        assert env.org.transfers.get(second.id).status == "completed"
        for transfer in (first, second):
            receipt = env.rpc("eth_getTransactionReceipt", transfer.transaction_hash)
            assert receipt is not None and int(receipt["status"], 16) == 1
        amounts = sorted(int(log["data"], 16) for log in env.transfer_logs("USDC", env.wallet))
        assert amounts == [3_000_000, 4_000_000]  # each paid once, neither twice


# -- stuck legs ----------------------------------------------------------------------------


def test_a_leg_under_the_base_fee_is_replaced_and_the_mined_version_settles_it(env: Env) -> None:
    env.rpc("evm_setAutomine", False)
    transfer = env.deposit("6", "s")
    offered = max_fee(env, transfer.transaction_hash)
    high = offered * 2  # the base fee rises above the leg's offer and stays there
    env.mine(1, base_fee=high)
    assert env.rpc("eth_getTransactionReceipt", transfer.transaction_hash) is None
    env.t.run_once()  # first seen waiting
    env.mine(2, base_fee=high)
    summary = env.t.run_once()  # stuck for stuck_after_blocks: re-priced
    assert summary.counts.get("legs_repriced") == 2  # the approval and the swap
    env.mine(1, base_fee=high)
    env.mine(3)
    env.t.run_once()
    env.t.run_once()
    shown = env.org.transfers.get(transfer.id)
    assert shown.status == "completed"
    assert shown.transaction_hash != transfer.transaction_hash  # the replacement was mined
    receipt = env.rpc("eth_getTransactionReceipt", shown.transaction_hash)
    assert receipt is not None and int(receipt["status"], 16) == 1
    assert max_fee(env, shown.transaction_hash) >= high
    moved = [log for log in env.transfer_logs("USDC", env.wallet)]
    assert [int(log["data"], 16) for log in moved] == [6_000_000]  # exactly one swap
    (tracked,) = [x for x in env.org.transactions.list(CHAIN).data if x.type == "deposit"]
    assert tracked.hash == shown.transaction_hash and tracked.status == "confirmed"


def test_under_a_fee_cap_nothing_above_it_is_broadcast_and_the_transfer_says_why(
    node: AnvilNode, deployed: dict[str, Any], storage_url: str, chain_state: None
) -> None:
    base = int(rpc(node.url, "eth_getBlockByNumber", "latest", False)["baseFeePerGas"], 16)
    cap = max(-(-4 * base // GWEI), 1)  # gwei: room for today's fees, not for a spike
    settings = {"confirmations": 0, "stuck_after_blocks": 1, "max_fee_per_gas": cap}
    with opened(node, deployed, storage_url, **settings) as env:
        env.rpc("evm_setAutomine", False)
        transfer = env.deposit("2", "c")
        assert max_fee(env, transfer.transaction_hash) <= cap * GWEI
        spike = cap * GWEI * 3  # above anything the cap allows
        env.mine(1, base_fee=spike)
        env.t.run_once()
        env.mine(2, base_fee=spike)
        summary = env.t.run_once()
        assert not summary.counts.get("legs_repriced")
        shown = env.org.transfers.get(transfer.id)
        assert shown.status == "submitted" and shown.waiting_reason == "fee above cap"
        signed = stored_versions(env.t)  # every version ever signed, so ever broadcast
        assert len(signed) == 2 and all(fee <= cap * GWEI for fee in signed)


def stored_versions(t: Treasury) -> list[int]:
    """The fee cap of every signed version of every leg the store holds."""
    with t._runtime.storage.read() as tx:
        rows = tx.query("SELECT raw FROM transfer_legs UNION ALL SELECT raw FROM leg_versions")
    return [unsigned(bytes(row["raw"]))["maxFeePerGas"] for row in rows]  # type: ignore[index]


# -- gas -----------------------------------------------------------------------------------


def test_a_wallet_that_lost_its_eth_waits_for_gas_then_completes(env: Env) -> None:
    env.rpc("evm_setAutomine", False)
    transfer = env.deposit("1", "g")
    env.rpc("anvil_setBalance", env.wallet, "0x0")
    env.mine(1)
    env.t.run_once()
    shown = env.org.transfers.get(transfer.id)
    assert shown.status == "submitted" and shown.waiting_reason == "insufficient gas"
    env.rpc("anvil_setBalance", env.wallet, hex(10**18))
    env.rpc("evm_setAutomine", True)
    env.t.run_once()  # its legs sent again (the node dropped what it could not pay for)
    env.mine(3)
    env.t.run_once()
    shown = env.org.transfers.get(transfer.id)
    assert shown.status == "completed" and shown.waiting_reason is None


def station_for(env: Env, eth: str = "2") -> str:
    """A second managed wallet of the organization, holding `eth`, made its gas station."""
    station = env.org.wallets.create(label="Gas", idempotency_key="gas")
    fund(env.node.url, env.deployed, station.address, "ETH", eth)
    env.org.policy.put(**py_policy(gas_station=station.id))
    return station.address


def top_ups(env: Env, station: str) -> list[Any]:
    return [x for x in env.org.transactions.list(CHAIN, wallet=station).data if x.type == "gas"]


def test_with_a_gas_station_a_wallet_that_lost_its_eth_is_topped_up_once_and_completes(
    env: Env,
) -> None:
    station = station_for(env)
    env.rpc("evm_setAutomine", False)
    transfer = env.deposit("1", "gs")
    env.rpc("anvil_setBalance", env.wallet, "0x0")
    env.mine(1)
    env.rpc("evm_setAutomine", True)
    for _ in range(3):  # no outside help: passes and blocks only
        env.t.run_once()
        env.mine(1)
    env.mine(3)
    env.t.run_once()
    shown = env.org.transfers.get(transfer.id)
    assert shown.status == "completed" and shown.waiting_reason is None
    (topped,) = top_ups(env, station)
    assert topped.status == "confirmed"
    assert int(env.rpc("eth_getBalance", env.wallet, "latest"), 16) > 0


def test_with_a_gas_station_a_wallet_without_eth_is_accepted_and_waits_for_its_top_up(
    env: Env,
) -> None:
    station = station_for(env)
    env.rpc("anvil_setBalance", env.wallet, "0x0")
    transfer = env.deposit("2", "g0")
    assert transfer.status == "pending" and transfer.waiting_reason == "insufficient gas"
    assert transfer.transaction_hash is None  # nothing sent before the top-up
    for _ in range(3):
        env.t.run_once()
        env.mine(1)
    env.mine(3)
    env.t.run_once()
    shown = env.org.transfers.get(transfer.id)
    assert shown.status == "completed" and shown.waiting_reason is None
    assert len(top_ups(env, station)) == 1
    statuses = [e["status"] for _, e in events(env.t, "transfer.") if e["id"] == transfer.id]
    assert statuses == ["pending", "submitted", "completed"]


def test_without_a_gas_station_a_wallet_without_eth_is_refused(env: Env) -> None:
    env.rpc("anvil_setBalance", env.wallet, "0x0")
    with pytest.raises(ValidationError, match="not enough ETH for gas"):
        env.deposit("2", "nog")
    assert env.org.transfers.list().count == 0
