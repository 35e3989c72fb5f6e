"""The books say so when they do not tie out (DESIGN §3 "The books"), on a real anvil:
a key used outside the service (`anvil_impersonateAccount`) is one unexplained outflow
with its amount and the log's hash, a balance changed without a log
(`anvil_setStorageAt`) an unexplained inflow, a completed transfer whose block a reorg
deeper than its confirmations removed a missing movement until its re-broadcast is
mined; each opened once, updated by later runs, never duplicated, and resolved when a
run ties out again or an admin accepts it (a correction, who and why in the audit log).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from eth_utils.crypto import keccak

from tests.conftest import MASTER_KEY, make_tenant
from tests.helpers import address, events, rpc, swap
from treasury import Treasury
from treasury.anvil import AnvilNode, fund
from treasury.evm.abi import TRANSFER

CHAIN = 31337
BALANCES_SLOT = 3  # `balanceOf` of our MintableERC20 (name, symbol, totalSupply before it)


class Env:
    """A treasury on anvil (0 confirmations), an organization, a managed wallet that
    received 100 USDC and 1 ETH after the deposit detector started (so the books know
    them), every pass run."""

    def __init__(self, node: AnvilNode, deployed: dict[str, Any], t: Treasury) -> None:
        self.node, self.deployed, self.t = node, deployed, t
        self.tenant = make_tenant(t)
        self.org = self.tenant.org
        self.wallet = self.org.wallets.create(label="Ops", idempotency_key="w").address
        t.run_once()  # the detector starts at the head: the books start with it
        self.fund(self.wallet, "USDC", "100")
        self.fund(self.wallet, "ETH", "1")
        summary = t.run_once()
        assert summary["deposits_received"] == 1, summary

    def rpc(self, method: str, *params: Any) -> Any:
        return rpc(self.node.url, method, *params)

    def head(self) -> int:
        return int(self.rpc("eth_blockNumber"), 16)

    def fund(self, who: str, symbol: str, amount: str) -> str:
        return fund(self.node.url, self.deployed, who, symbol, amount)

    def token(self, symbol: str) -> str:
        return str(self.deployed["addresses"][symbol])

    def send_as(self, sender: str, symbol: str, to: str, raw: int) -> str:
        """`sender` moves `raw` of a token to `to` with a key the service never used."""
        self.rpc("anvil_impersonateAccount", sender)
        try:
            tx_hash = self.rpc(
                "eth_sendTransaction",
                {
                    "from": sender,
                    "to": self.token(symbol),
                    "data": "0x" + TRANSFER.encode(to, raw).hex(),
                    "gas": hex(100_000),
                },
            )
        finally:
            self.rpc("anvil_stopImpersonatingAccount", sender)
        receipt = self.rpc("eth_getTransactionReceipt", tx_hash)
        assert int(receipt["status"], 16) == 1
        return str(tx_hash)

    def set_balance(self, symbol: str, who: str, raw: int) -> None:
        """Write a balance into the token's storage: no log, no transaction."""
        slot = keccak(bytes.fromhex(who[2:].rjust(64, "0")) + BALANCES_SLOT.to_bytes(32, "big"))
        value = "0x" + raw.to_bytes(32, "big").hex()
        self.rpc("anvil_setStorageAt", self.token(symbol), "0x" + slot.hex(), value)


def opened(node: AnvilNode, deployed: dict[str, Any], storage_url: str) -> Treasury:
    spec = {
        "url": node.url,
        "addresses": deployed["addresses"],
        "minter_key": deployed["minter_key"],
    }
    return Treasury.open(
        storage_url, master_key=MASTER_KEY, chains={CHAIN: {**spec, "confirmations": 0}}
    )


@pytest.fixture
def env(
    node: AnvilNode, deployed: dict[str, Any], storage_url: str, chain_state: None
) -> Iterator[Env]:
    t = opened(node, deployed, storage_url)
    try:
        yield Env(node, deployed, t)
    finally:
        t.close()


def the_break(env: Env) -> Any:
    (found,) = env.org.reconciliation.get().open
    return found


# -- a key used outside the service -------------------------------------------------------


def test_tokens_moved_out_with_the_key_used_elsewhere_are_one_unexplained_outflow(env: Env):
    run = env.org.reconciliation.run()
    assert run.tied_out and run.pairs == 3 and run.breaks_open == 0
    moved = env.send_as(env.wallet, "USDC", address().lower(), 30_000_000)
    run = env.org.reconciliation.run()
    assert not run.tied_out and run.pairs_tied_out == 2 and run.breaks_open == 1
    found = the_break(env)
    assert (found.kind, found.wallet, found.token, found.chain_id) == (
        "unexplained_outflow",
        env.wallet,
        "USDC",
        CHAIN,
    )
    assert (found.expected, found.actual, found.difference) == ("100", "70", "-30")
    assert found.evidence == [moved] and found.block_number == run.block_number
    assert found.status == "open" and found.resolved_at is None
    env.t.run_once()  # the job's run too, and passes after it: the same break
    env.org.reconciliation.run()
    assert [b.id for b in env.org.reconciliation.get().open] == [found.id]
    opened_events = events(env.t, "reconciliation.break_opened")
    assert [data["id"] for _, data in opened_events] == [found.id]  # announced once
    assert opened_events[0][1]["difference"] == "-30" and opened_events[0][1]["evidence"] == [moved]

    env.set_balance("USDC", env.wallet, 100_000_000)  # the balance back: it ties out again
    run = env.org.reconciliation.run()
    assert run.tied_out and run.breaks_open == 0
    (resolved,) = env.org.reconciliation.breaks(status="resolved").data
    assert resolved.id == found.id and resolved.status == "resolved"
    assert resolved.resolved_at is not None and resolved.resolved_by is None
    assert [data["id"] for _, data in events(env.t, "reconciliation.break_resolved")] == [found.id]
    assert env.org.reconciliation.breaks(status="open").data == []


def test_a_balance_changed_without_a_log_is_an_unexplained_inflow(env: Env):
    env.set_balance("USDC", env.wallet, 150_000_000)
    run = env.org.reconciliation.run()
    assert not run.tied_out
    found = the_break(env)
    assert (found.kind, found.token) == ("unexplained_inflow", "USDC")
    assert (found.expected, found.actual, found.difference) == ("100", "150", "50")
    assert found.evidence == []  # no Transfer log explains it
    env.org.reconciliation.run()
    assert [b.id for b in env.org.reconciliation.get().open] == [found.id]


def test_an_admin_accepts_a_difference_with_a_correction_and_a_reason(env: Env):
    """The worked example of docs/books.md: a key used elsewhere moves 30 USDC out, the
    other side sends 10 back (a deposit, as any inflow nobody's transfer made), an admin
    accepts the 30 that left; the books tie out again, and say who and why."""
    stranger = address().lower()
    env.send_as(env.wallet, "USDC", stranger, 30_000_000)
    env.fund(stranger, "ETH", "1")
    back = env.send_as(stranger, "USDC", env.wallet, 10_000_000)
    env.t.run_once()  # the 10 coming back is a deposit
    env.org.reconciliation.run()
    found = the_break(env)
    assert (found.kind, found.expected, found.actual, found.difference) == (
        "unexplained_outflow",
        "110",
        "80",
        "-30",
    )
    assert back not in found.evidence  # the deposit is in the books
    admin = env.t.admin.create_api_key(env.org.id, user_id="controller")
    reader = env.t.admin.create_api_key(env.org.id, user_id="viewer", scopes=["read"])
    from treasury.errors import Conflict, Forbidden

    with pytest.raises(Forbidden):
        env.t.for_api_key(reader.secret).reconciliation.resolve(found.id, note="no")
    handle = env.t.for_api_key(admin.secret)
    done = handle.reconciliation.resolve(found.id, note="key leaked; funds written off")
    assert done.status == "resolved" and done.note == "key leaked; funds written off"
    assert done.resolved_by is not None and done.resolved_by.user_id == "controller"
    with pytest.raises(Conflict):
        handle.reconciliation.resolve(found.id, note="again")
    run = env.org.reconciliation.run()
    assert run.tied_out and run.breaks_open == 0
    balances = {b.token: b for b in env.org.ledger.balances(env.wallet).balances}
    assert balances["USDC"].posted == "80"
    statement = env.org.statements.get(wallet=env.wallet, token="USDC")
    assert [(e.kind, e.amount) for e in statement.entries] == [
        ("deposit", "100"),
        ("deposit", "10"),
        ("correction", "-30"),
    ]
    audit = [e for e in handle.audit_events.list().data if e.operation == "reconciliation.resolve"]
    accepted = [e for e in audit if e.status == 200]
    assert [(e.object_id, e.actor.user_id) for e in accepted] == [(str(found.id), "controller")]
    assert sorted(e.status for e in audit) == [200, 403, 409]  # the refusals recorded too


# -- the chain went back ------------------------------------------------------------------


def test_a_completed_transfer_reorged_out_is_a_missing_movement_until_mined_again(env: Env):
    before = env.head()
    transfer = env.org.transfers.create(
        swap("deposit", env.wallet, env.wallet, "5"), idempotency_key="d"
    )
    env.t.run_once()
    assert env.org.transfers.get(transfer.id).status == "completed"
    assert env.org.reconciliation.run().tied_out
    mined_in = env.head()
    env.rpc("evm_setAutomine", False)  # what is sent again waits in the pool
    env.rpc("anvil_rollback", mined_in - before)  # deeper than its 0 confirmations
    assert env.rpc("eth_getTransactionReceipt", transfer.transaction_hash) is None
    env.t.run_once()  # the reorg seen: the breaks opened at once, then the legs sent again
    opened = {b.token: b for b in env.org.reconciliation.get().open}
    assert set(opened) == {"USDC", "c0"}  # what the books moved for it, both sides
    usdc, c0 = opened["USDC"], opened["c0"]
    assert {usdc.kind, c0.kind} == {"missing_movement"}
    assert usdc.difference == "5" and c0.difference.startswith("-5")
    assert usdc.evidence == [transfer.id, transfer.transaction_hash]
    assert env.org.transfers.get(transfer.id).status == "completed"  # never backwards
    with env.t.storage.read() as tx:  # the swap's stored bytes (its last leg)
        swap_raw = bytes(
            tx.query(
                "SELECT raw FROM transfer_legs WHERE transfer_id = ? ORDER BY position DESC",
                (transfer.id,),
            )[0]["raw"]
        )
    env.rpc("anvil_dropTransaction", transfer.transaction_hash)  # not mined yet
    env.rpc("anvil_mine", "0x3")  # past the block the books counted it in
    run = env.org.reconciliation.run()
    assert not run.tied_out and run.block_number >= usdc.block_number
    again = {b.token: b for b in env.org.reconciliation.get().open}
    assert {b.id for b in again.values()} == {usdc.id, c0.id}  # updated, never duplicated
    assert again["USDC"].kind == "missing_movement" and again["USDC"].difference == "5"

    env.rpc("eth_sendRawTransaction", "0x" + swap_raw.hex())  # mined again at last
    env.rpc("anvil_mine", "0x1")
    assert env.rpc("eth_getTransactionReceipt", transfer.transaction_hash) is not None
    env.t.run_once()
    run = env.org.reconciliation.run()
    assert run.tied_out and run.breaks_open == 0
    resolved = {b.id for b in env.org.reconciliation.breaks(status="resolved").data}
    assert resolved == {usdc.id, c0.id}
    opened_ids = [data["id"] for _, data in events(env.t, "reconciliation.break_opened")]
    assert sorted(opened_ids) == sorted([usdc.id, c0.id])  # each announced once
