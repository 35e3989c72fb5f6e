"""The snapshot job: every holder's c0 balance on each chain, with the net apy of the
moment, at most once per `snapshot_interval` and always at the first pass of a period."""

from __future__ import annotations

from datetime import datetime, timedelta

from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import wallets
from ..errors import UpstreamError
from ..evm.abi import BALANCE_OF, EARNER_RATE
from ..evm.multicall import multicall
from . import store
from .operations import project
from .periods import period_of

BATCH = 500  # balanceOf calls per multicall


def snapshot_yields(runtime: Runtime, report: Report) -> None:
    """Job: snapshot each chain that has c0 and a rate source, when one is due."""
    for chain_id in runtime.chains.ids():
        with report.part(f"chain {chain_id}"):
            if take_snapshot(runtime, chain_id):
                report.add(yield_snapshots=1)


def due(last: datetime | None, now: datetime, interval: timedelta) -> bool:
    return last is None or now - last >= interval or period_of(now) != period_of(last)


def take_snapshot(runtime: Runtime, chain_id: int, *, force: bool = False) -> bool:
    """Read and store one snapshot of `chain_id` if one is due (or `force`); whether one
    was stored."""
    now, interval = runtime.now(), timedelta(seconds=runtime.snapshot_interval)
    if force:
        interval = timedelta(0)
    chain = runtime.chains.get(chain_id)
    c0, source = chain.addresses.get("c0"), chain.addresses.get("earner_rate_source")
    if c0 is None or source is None:
        return False
    with runtime.storage.read() as tx:
        if not due(store.snapshot_times(tx, chain_id)[1], now, interval):
            return False
        holders = wallets.every_address(tx)
    (rate,) = multicall(chain, [(source, EARNER_RATE, ())])
    if rate is None:
        raise UpstreamError("the earner rate source did not answer")
    balances: dict[str, int] = {}
    for start in range(0, len(holders), BATCH):
        batch = holders[start : start + BATCH]
        answers = multicall(chain, [(c0, BALANCE_OF, (holder,)) for holder in batch])
        for holder, answer in zip(batch, answers, strict=True):
            if answer is None:
                raise UpstreamError(f"c0 did not answer the balance of {holder}")
            if int(str(answer[0])):
                balances[holder] = int(str(answer[0]))
    with runtime.storage.transaction() as tx:
        tx.lock(f"yield-snapshot:{chain_id}")  # two workers at once store one snapshot
        if not due(store.snapshot_times(tx, chain_id)[1], now, interval):
            return False
        store.add_snapshot(tx, chain_id, now, project(0, int(str(rate[0]))).apy, balances)
    return True
