"""Trying a distribution without waiting a week, and why a pass published nothing.

`close_current_period` is for test chains (`MintingChain`: the devnet, `treasury devnet`): it
takes a snapshot at once, then closes the current period a moment later (`settle` after
that snapshot, so that the balances it holds earn something whatever c0's decimals) and
publishes it as the weekly job would, root posted included. The period stays closed: the
rest of its week counts for no distribution (docs/decisions.md). `why_nothing` says why a
chain has no newly published period.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from .._infra.runtime import Runtime
from ..backends.chain.minting import MintingChain
from ..errors import Conflict
from . import store
from .artifacts import stored_period
from .models import YieldPeriod
from .periods import bounds, period_of
from .publication import post_roots, publish_period
from .snapshots import take_snapshot

SETTLE = timedelta(seconds=1)  # the least time a trial period runs after its snapshot
SETTLE_LIMIT = timedelta(seconds=10)  # the most it waits for the largest balance to earn
YEAR = timedelta(days=365)  # the year of the owed formula (`publication`)


def close_current_period(runtime: Runtime, chain_id: int) -> YieldPeriod | None:
    """Close and publish the current period of a test chain, now; the published period,
    or None when no holder earned anything in it (nothing is listed then)."""
    if not isinstance(runtime.chains.get(chain_id), MintingChain):
        raise Conflict(
            f"chain {chain_id} cannot mint: a period is closed early only on a test chain"
            " (the devnet or `treasury devnet`); elsewhere periods end each Monday 00:00 UTC"
        )
    period_id = period_of(runtime.now())
    with runtime.storage.read() as tx:
        if store.built_periods(tx, chain_id, period_id, period_id + 1):
            raise Conflict(f"period {period_id} of chain {chain_id} is already closed")
    take_snapshot(runtime, chain_id, force=True)
    snapped = runtime.now()
    with runtime.storage.read() as tx:
        taken = store.snapshots(tx, chain_id, *bounds(period_id))
    wait = settle(max(taken[-1].balances.values(), default=0), taken[-1].apy) if taken else SETTLE
    while (until := runtime.now()) < snapped + wait and period_of(until) == period_id:
        time.sleep(0.05)
    published = publish_period(runtime, chain_id, period_id, until=min(until, bounds(period_id)[1]))
    post_roots(runtime, chain_id)
    if not published:
        return None
    with runtime.storage.read() as tx:
        row = store.artifact(tx, chain_id, period_id)
    return None if row is None else stored_period(row)


def settle(balance: int, apy: Decimal) -> timedelta:
    """How long a trial period runs after its snapshot: until `balance` (raw c0, the
    largest held) earns a raw unit at `apy` (two, clear of rounding; an 18-decimal c0 at
    once, a 6-decimal one in seconds), within `SETTLE` and `SETTLE_LIMIT`."""
    if balance <= 0 or apy <= 0:
        return SETTLE
    needed = YEAR * (math.log1p(2 / balance) / math.log1p(float(apy)))
    return min(max(needed, SETTLE), SETTLE_LIMIT)


def why_nothing(runtime: Runtime, chain_id: int) -> str:
    """Why `chain_id` has no period to publish now, in words a person reads."""
    chain = runtime.chains.get(chain_id)
    if chain.addresses.get("c0") is None or chain.addresses.get("earner_rate_source") is None:
        return f"chain {chain_id} has no c0 or no earner rate source: it has no yield"
    now = runtime.now()
    current = period_of(now)
    ends = _when(bounds(current)[1])
    with runtime.storage.read() as tx:
        first, _ = store.snapshot_times(tx, chain_id)
        built = store.built_periods(tx, chain_id, 0, current + 1)
    if current in built:
        return (
            f"chain {chain_id}: the current period {current} was closed early (a trial);"
            f" the next one starts at {ends}"
        )
    if first is None:
        return (
            f"chain {chain_id}: no snapshot of c0 holders yet (each pass takes one when due);"
            f" the current period ends at {ends}"
        )
    if period_of(first) == current:
        return (
            f"chain {chain_id}: no period has ended since the first snapshot"
            f" ({_when(first)}); the current period ends at {ends}"
        )
    return (
        f"chain {chain_id}: every period ended since the first snapshot ({_when(first)}) is"
        f" already published (one in which no holder earned is not listed); the current"
        f" period ends at {ends}"
    )


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
