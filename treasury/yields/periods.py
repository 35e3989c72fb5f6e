"""Weekly distribution periods, and what a holder earns in one (DESIGN §3 "Yield").

A period is a week from Monday 00:00 UTC; its id counts the whole weeks since Monday
1970-01-05. A holder's amount is the sum, over consecutive snapshots with each segment
clipped to the period, of floor(balance * ((1 + apy)^(dt / 365 days) - 1)), with the balance
and the net apy at the segment's start. A segment ends at the next snapshot, or at the
period's end when there is none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_FLOOR, Decimal

from .precision import CONTEXT as _CTX

EPOCH = datetime(1970, 1, 5, tzinfo=UTC)  # a Monday
WEEK = timedelta(days=7)
_YEAR_MICROSECONDS = 365 * 86_400 * 1_000_000


def period_of(moment: datetime) -> int:
    """The id of the period `moment` falls in."""
    return (moment - EPOCH) // WEEK


def bounds(period_id: int) -> tuple[datetime, datetime]:
    """Where a period starts (inclusive) and ends (exclusive)."""
    start = EPOCH + period_id * WEEK
    return start, start + WEEK


@dataclass(frozen=True)
class Snapshot:
    """The c0 balances (raw units, non-zero only) of a chain's holders at `taken_at`,
    with the net apy of that moment."""

    taken_at: datetime
    apy: Decimal
    balances: Mapping[str, int]


def growth(apy: Decimal, span: timedelta) -> Decimal:
    """(1 + apy)^(span / 365 days) - 1, to `precision.DIGITS` significant digits."""
    exponent = _CTX.divide(Decimal(span // timedelta(microseconds=1)), _YEAR_MICROSECONDS)
    return _CTX.subtract(_CTX.power(_CTX.add(1, apy), exponent), 1)


def amounts(
    snapshots: Sequence[Snapshot], period_id: int, until: datetime | None = None
) -> dict[str, int]:
    """Each holder's amount for the period, from `snapshots` in time order (those before
    the period count from its start), up to its end or `until` (a period closed early);
    holders whose amount is zero are left out."""
    start, end = bounds(period_id)
    end = until or end
    totals: dict[str, int] = {}
    for i, snapshot in enumerate(snapshots):
        until = snapshots[i + 1].taken_at if i + 1 < len(snapshots) else end
        begin, finish = max(snapshot.taken_at, start), min(until, end)
        if finish <= begin:
            continue
        factor = growth(snapshot.apy, finish - begin)
        for holder, balance in snapshot.balances.items():
            earned = _CTX.multiply(Decimal(balance), factor).to_integral_value(ROUND_FLOOR)
            totals[holder] = totals.get(holder, 0) + int(earned)
    return {holder: amount for holder, amount in totals.items() if amount > 0}
