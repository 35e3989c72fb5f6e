"""The publication job: at the first pass after a period ends, build its artifact and
freeze it (DESIGN §3 "Yield distributions").

The artifact is an OpenZeppelin ``StandardMerkleTree`` (standard-v1) over leaves
``(uint256 index, address account, uint256 amount)``, index = position in ascending
account order, with every holder's amount from `periods.amounts`. It is stored as the
exact JSON body the API serves, and never rebuilt: a second attempt (another worker, a
later pass) changes nothing. A period without claims is recorded as built, and not
listed. Where the chain can operate its distributor (a local
chain whose test contracts we own), each published root is then posted with the
period's total in c0 (`Chain.post_yield_root`); a root found already posted is recorded.
"""

from __future__ import annotations

from datetime import datetime

from .._infra.jobs import Report
from .._infra.runtime import Runtime
from ..evm.abi import ROOTS
from ..evm.merkle import StandardMerkleTree
from . import store
from .models import YieldLeaf, YieldPeriod
from .periods import amounts, bounds, period_of

LEAF_ENCODING = ["uint256", "address", "uint256"]
PERIODS_PER_PASS = 8  # a worker back from a long outage catches up over a few passes


def publish_yield_periods(runtime: Runtime, report: Report) -> None:
    """Job: build every ended period of each chain that is not built yet."""
    for chain_id in runtime.chains.ids():
        with report.part(f"chain {chain_id}"):
            report.add(yield_periods_published=publish_chain(runtime, chain_id))


def publish_chain(runtime: Runtime, chain_id: int) -> int:
    """Build the ended periods of `chain_id` since its first snapshot; how many were
    published with claims."""
    current = period_of(runtime.now())
    with runtime.storage.read() as tx:
        first, _ = store.snapshot_times(tx, chain_id)
        if first is None:
            return 0
        low = period_of(first)
        built = store.built_periods(tx, chain_id, low, current)
    published = 0
    for period_id in [p for p in range(low, current) if p not in built][:PERIODS_PER_PASS]:
        published += publish_period(runtime, chain_id, period_id)
    post_roots(runtime, chain_id)
    return published


def post_roots(runtime: Runtime, chain_id: int) -> None:
    """Post every published root not posted yet, where the chain can; a crash between a
    posting and its record is found on the chain (the distributor keeps one root)."""
    chain = runtime.chains.get(chain_id)
    distributor = chain.addresses.get("yield_distributor")
    if distributor is None or not chain.can_mint:
        return
    with runtime.storage.read() as tx:
        pending = store.unposted(tx, chain_id)
    for row in pending:
        (onchain,) = ROOTS.decode(chain.call(distributor, ROOTS.encode(row["period_id"])))
        if "0x" + bytes(onchain).hex() == row["root"]:
            tx_hash: str | None = ""  # posted before its record: the hash is not known
        else:
            tx_hash = chain.post_yield_root(row["period_id"], row["root"], int(row["total"]))
        if tx_hash is not None:
            with runtime.storage.transaction() as tx:
                store.posted(tx, chain_id, row["period_id"], tx_hash)


def publish_period(
    runtime: Runtime, chain_id: int, period_id: int, until: datetime | None = None
) -> bool:
    """Build and freeze one period; whether it has claims (and this call stored it).
    `until` closes the period there instead of at its end (a trial: `trial.py`)."""
    start, end = bounds(period_id)
    end = until or end
    with runtime.storage.read() as tx:
        owed = amounts(store.snapshots(tx, chain_id, start, end), period_id, end)
    now = runtime.now()
    period = build(chain_id, period_id, owed, now, end) if owed else None
    body = None if period is None else period.model_dump_json()
    with runtime.storage.transaction() as tx:
        stored = store.freeze(tx, chain_id, period_id, start, end, now, body)
    return stored and period is not None


def build(
    chain_id: int,
    period_id: int,
    owed: dict[str, int],
    now: datetime,
    until: datetime | None = None,
) -> YieldPeriod:
    """The artifact of a period (closed at its end, or at `until`) from each holder's
    amount (all positive)."""
    start, end = bounds(period_id)
    end = until or end
    accounts = sorted(owed)
    values = [[i, account, str(owed[account])] for i, account in enumerate(accounts)]  # JSON-safe
    tree = StandardMerkleTree.of(values, LEAF_ENCODING)
    return YieldPeriod(
        period_id=str(period_id),
        chain_id=chain_id,
        root=tree.root,
        total=str(sum(owed.values())),
        count=len(values),
        starts_at=start,
        ends_at=end,
        published_at=now,
        leaf_encoding=LEAF_ENCODING,
        leaves=[
            YieldLeaf(index=i, account=account, amount=str(owed[account]), proof=tree.proof(i))
            for i, account in enumerate(accounts)
        ],
        tree=tree.dump(),
    )
