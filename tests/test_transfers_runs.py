"""Payout runs on a real anvil: many legs of one wallet in flight at once.

40 deposits from one wallet, posted one by one or as one batch, on a chain mining a block
every 2 seconds, land in at most 3 blocks with consecutive nonces (the wallet keeps up to
`max_in_flight` legs in flight; the rest wait in its queue for the next block). A leg the
node refuses, or one that another transaction replaces, never strands the legs behind
it: the hole is filled, the run completes, and the refused item can be sent again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from treasury import Treasury, UpstreamError
from treasury.anvil import AnvilNode, fund

from .conftest import MASTER_KEY, make_tenant
from .helpers import address, rpc, swap

CHAIN = 31337


class Run:
    """A treasury on the node, an organization and a funded managed wallet."""

    def __init__(self, node: AnvilNode, deployed: dict[str, Any], storage_url: str) -> None:
        self.node, self.deployed = node, deployed
        self.t = Treasury.open(storage_url, master_key=MASTER_KEY, chains={CHAIN: deployed})
        self.org = make_tenant(self.t).org
        self.wallet = self.org.wallets.create(label="Payouts", idempotency_key="w").address
        fund(node.url, deployed, self.wallet, "USDC", "1000")
        fund(node.url, deployed, self.wallet, "ETH", "10")

    def rpc(self, method: str, *params: Any) -> Any:
        return rpc(self.node.url, method, *params)

    def head(self) -> int:
        return int(self.rpc("eth_blockNumber"), 16)

    def deposit(self, amount: str, to: str | None = None) -> dict[str, Any]:
        return swap("deposit", self.wallet, to or self.wallet, amount)

    def settle(self, ids: list[str], within: float = 90) -> dict[str, str]:
        """Run passes until every transfer of `ids` is final; their statuses."""
        deadline = time.monotonic() + within
        while True:
            statuses = {i: self.org.transfers.get(i).status for i in ids}
            if all(s in ("completed", "failed") for s in statuses.values()):
                return statuses
            assert time.monotonic() < deadline, statuses
            self.t.run_once()
            time.sleep(0.2)

    def legs(self) -> list[dict[str, Any]]:
        """Every stored leg with its receipt's block, by nonce."""
        with self.t.storage.read() as tx:
            rows = tx.query("SELECT transfer_id, nonce, hash FROM transfer_legs ORDER BY nonce")
        found = []
        for row in rows:
            receipt = self.rpc("eth_getTransactionReceipt", row["hash"])
            found.append(
                {**row, "block": None if receipt is None else int(receipt["blockNumber"], 16)}
            )
        return found


@pytest.fixture
def run(
    node: AnvilNode, deployed: dict[str, Any], storage_url: str, chain_state: None
) -> Iterator[Run]:
    made = Run(node, deployed, storage_url)
    yield made
    made.t.close()


@pytest.mark.parametrize("how", ["one by one", "one batch"])
def test_forty_deposits_from_one_wallet_are_mined_in_at_most_three_blocks(
    run: Run, how: str
) -> None:
    run.rpc("evm_setIntervalMining", 2)  # a block every 2 s, as the issue measured
    start = run.head()
    while run.head() == start:  # begin just after a block, as a run would at any time
        time.sleep(0.05)
    bodies = [run.deposit("1") for _ in range(40)]
    if how == "one by one":
        made = [run.org.transfers.create(b, idempotency_key=f"d{i}") for i, b in enumerate(bodies)]
    else:
        made = [
            item.result() for item in run.org.transfers.create_batch(bodies, idempotency_key="r")
        ]
    statuses = run.settle([t.id for t in made])
    assert set(statuses.values()) == {"completed"}
    legs = run.legs()
    assert len(legs) == 80  # an approval and a swap each
    nonces = [leg["nonce"] for leg in legs]
    assert nonces == list(range(nonces[0], nonces[0] + 80))  # consecutive, none twice
    blocks = sorted({leg["block"] for leg in legs})
    print(f"{how}: blocks {blocks}")
    assert len(blocks) <= 3, blocks


def refuse(monkeypatch: pytest.MonkeyPatch, run: Run, *positions: int) -> None:
    """The node refuses the legs sent at these positions (1 is the first), definitely."""
    chain = run.t.chain(CHAIN)
    send, sent = chain.send_raw_transactions, []

    def refusing(raws: list[bytes]) -> list[str | UpstreamError]:
        answers: list[str | UpstreamError] = []
        for raw in raws:
            sent.append(raw)
            if len(sent) in positions:
                answers.append(UpstreamError("insufficient funds for gas * price + value"))
            else:
                answers += send([raw])
        return answers

    monkeypatch.setattr(chain, "send_raw_transactions", refusing)


def test_a_refused_leg_does_not_strand_the_legs_behind_it(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuse(monkeypatch, run, 5, 6)  # both legs of item 2: nothing of it went out
    recipients = [address().lower() for _ in range(6)]
    bodies = [run.deposit(str(i + 1), to) for i, to in enumerate(recipients)]
    answer = run.org.transfers.create_batch(bodies, idempotency_key="holes")
    monkeypatch.undo()
    assert [item.status for item in answer] == [201, 201, 502, 201, 201, 201]
    assert answer[2].error is not None and "insufficient funds" in answer[2].error["error"]
    kept = [item.result().id for item in answer if item.accepted]
    statuses = run.settle(kept)  # the hole is filled within two passes; the rest is mined
    assert set(statuses.values()) == {"completed"}
    assert run.legs()[-1]["block"] is not None
    # the run's answer kept no 502: sent again, the refused item runs afresh, the rest replay
    again = run.org.transfers.create_batch(bodies, idempotency_key="holes")
    assert not again.replayed and [item.status for item in again] == [201] * 6
    assert [again[i].result().id for i in (0, 1, 3, 4, 5)] == kept
    run.settle([again[2].result().id])
    for index, to in enumerate(recipients):  # each recipient paid its amount, once
        c0 = {b.symbol: int(b.raw) for b in run.org.balances.get(CHAIN, to)}["c0"]
        assert c0 == (index + 1) * 10 ** run.t.decimals(CHAIN, "c0")


def test_a_replaced_leg_does_not_strand_the_legs_behind_it(run: Run) -> None:
    run.rpc("evm_setAutomine", False)
    answer = run.org.transfers.create_batch(
        [run.deposit(str(i + 1)) for i in range(4)], idempotency_key="replaced"
    )
    made = [item.result() for item in answer]
    with run.t.storage.read() as tx:
        swap_leg = tx.one(
            "SELECT nonce, raw FROM transfer_legs WHERE transfer_id = ? AND position = 1",
            (made[1].id,),
        )
        custody_ref = tx.one("SELECT custody_ref FROM wallets WHERE address = ?", (run.wallet,))
    chain = run.t.chain(CHAIN)
    fees = chain.offered_fees()
    other = run.t._runtime.signer.sign(  # the wallet's key, elsewhere: same nonce, more fee
        chain,
        custody_ref=custody_ref["custody_ref"],
        nonce=int(swap_leg["nonce"]),
        to=run.wallet,
        gas=21_000,
        fees={name: value * 3 for name, value in fees.items()},
    )
    chain.send_raw_transaction(other.raw)
    run.rpc("anvil_mine", "0x1")
    run.rpc("evm_setAutomine", True)
    statuses = run.settle([t.id for t in made])
    assert [statuses[t.id] for t in made] == ["completed", "failed", "completed", "completed"]
    assert run.org.transfers.get(made[1].id).failure_reason.startswith("replaced")


def test_a_leg_refused_after_which_the_next_went_out_is_settled_by_the_chain(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sent together, item 2's approval is refused but its swap is taken (it waits in the
    node's pool): it may still be mined, so the claim is kept (502, ambiguous) and the
    job settles it by the chain's evidence, sending its same stored bytes again."""
    refuse(monkeypatch, run, 5)
    bodies = [run.deposit(str(i + 1)) for i in range(6)]
    answer = run.org.transfers.create_batch(bodies, idempotency_key="doubt")
    monkeypatch.undo()
    assert [item.status for item in answer] == [201, 201, 502, 201, 201, 201]
    kept = [item.result().id for item in answer if item.accepted]
    (doubted,) = [t for t in run.org.transfers.list(limit=200) if t.id not in kept]
    assert doubted.status == "pending"  # kept in flight, visible from its claim on
    statuses = run.settle([*kept, doubted.id])
    assert set(statuses.values()) == {"completed"}
    again = run.org.transfers.create_batch(bodies, idempotency_key="doubt")
    assert [item.status for item in again] == [201] * 6  # item 2 from its own key now
    assert again[2].result().id == doubted.id
