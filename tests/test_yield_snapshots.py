"""Yield distributions, the first half: weekly periods, the amount formula, and the
snapshot job on the devnet with an injected clock."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treasury import Treasury
from treasury.backends.chain.devnet import DevnetChain
from treasury.yields import periods, project
from treasury.yields.periods import Snapshot, amounts, bounds, period_of
from treasury.yields.store import snapshots

from .conftest import MASTER_KEY, make_tenant

CHAIN = 31337
TUESDAY = datetime(2026, 11, 17, 9, 30, tzinfo=UTC)  # in the week of Monday 2026-11-16


def test_periods_are_weeks_from_monday_1970_01_05():
    assert period_of(datetime(1970, 1, 5, tzinfo=UTC)) == 0
    assert period_of(datetime(1970, 1, 11, 23, 59, 59, tzinfo=UTC)) == 0
    assert period_of(datetime(1970, 1, 12, tzinfo=UTC)) == 1
    week = period_of(TUESDAY)
    start, end = bounds(week)
    assert start == datetime(2026, 11, 16, tzinfo=UTC) and start.weekday() == 0
    assert end - start == timedelta(days=7) and period_of(end) == week + 1


def reference(segments: list[tuple[int, str, timedelta]]) -> int:
    """The formula of DESIGN §3, written out again: segments of (balance, apy, length)."""
    total = 0
    with localcontext() as ctx:
        ctx.prec = 50  # DESIGN §3: 50 significant digits
        for balance, apy, span in segments:
            days = Decimal(span.total_seconds()) / 86_400 if span.microseconds == 0 else None
            assert days is not None  # the tests use whole seconds
            total += math.floor(balance * ((1 + Decimal(apy)) ** (days / 365) - 1))
    return total


@settings(deadline=None)
@given(
    apy=st.decimals(min_value="0", max_value="10", places=20),
    seconds=st.integers(min_value=1, max_value=7 * 86_400),
    balance=st.integers(min_value=1, max_value=10**30),
)
def test_a_segment_computes_at_fifty_digits_as_estimates_do(apy, seconds, balance):
    """DESIGN §3: periods and estimates alike at 50 significant digits (periods used 60)."""
    with localcontext() as ctx:
        ctx.prec = 50
        growth = (1 + apy) ** (Decimal(seconds * 10**6) / (365 * 86_400 * 10**6)) - 1
        earned = math.floor(balance * growth)
    span = timedelta(seconds=seconds)
    assert periods.growth(apy, span) == growth  # the same digits, not only the same floor
    start = bounds(period_of(TUESDAY))[0]
    taken = [Snapshot(start, apy, {"0x" + "a" * 40: balance})]
    got = amounts(taken, period_of(TUESDAY), until=start + span)
    assert got == ({"0x" + "a" * 40: earned} if earned else {})


def test_a_holders_amount_sums_its_clipped_segments():
    """Snapshots on Friday of the week before, Tuesday and Thursday, and one after the
    period's end: the first segment counts from Monday, the last ends at the next Monday."""
    a, b = "0x" + "a" * 40, "0x" + "b" * 40
    week = period_of(TUESDAY)
    start, end = bounds(week)
    friday, thursday = start - timedelta(days=3), start + timedelta(days=3, hours=12)
    taken = [
        Snapshot(friday, Decimal("0.04"), {a: 10**21}),
        Snapshot(TUESDAY, Decimal("0.05"), {a: 2 * 10**21, b: 5 * 10**20}),
        Snapshot(thursday, Decimal("0.03"), {b: 10**18}),
        Snapshot(end + timedelta(hours=1), Decimal("0.9"), {a: 10**30}),
    ]
    got = amounts(taken, week)
    assert got == {
        a: reference([(10**21, "0.04", TUESDAY - start), (2 * 10**21, "0.05", thursday - TUESDAY)]),
        b: reference([(5 * 10**20, "0.05", thursday - TUESDAY), (10**18, "0.03", end - thursday)]),
    }
    later = end + timedelta(hours=1)  # the next week: the last snapshot runs to its end
    assert amounts(taken, week + 1) == {
        a: reference([(10**30, "0.9", end + timedelta(days=7) - later)]),
        b: reference([(10**18, "0.03", later - end)]),
    }
    assert amounts(taken, week - 1) == {a: reference([(10**21, "0.04", start - friday)])}
    assert amounts([], week) == {}


@settings(deadline=None, max_examples=60)
@given(
    balances=st.lists(st.integers(min_value=0, max_value=10**27), min_size=1, max_size=5),
    hours=st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=5),
    apy=st.decimals(min_value="0", max_value="2", places=6),
)
def test_amounts_never_exceed_a_full_week_and_leave_zeros_out(balances, hours, apy):
    """One holder, snapshots at random hours of the week: its amount is at most what its
    largest balance earns in the whole week, never negative, and absent when zero."""
    holder = "0x" + "c" * 40
    week = period_of(TUESDAY)
    start, end = bounds(week)
    moments = sorted({start + timedelta(hours=h) for h in hours})
    taken = [
        Snapshot(moment, apy, {holder: balance} if balance else {})
        for moment, balance in zip(moments, balances, strict=False)
    ]
    got = amounts(taken, week).get(holder)
    # Each snapshot holds until the next one or the period's end; those after it count nothing.
    follows = [snapshot.taken_at for snapshot in taken[1:]] + [end]
    segments = [
        (balance, str(apy), min(until, end) - snapshot.taken_at)
        for snapshot, until in zip(taken, follows, strict=True)
        for balance in snapshot.balances.values()
        if min(until, end) > snapshot.taken_at
    ]
    expected = reference(segments)
    ceiling = reference([(max(balances), str(apy), timedelta(days=7))])
    assert 0 <= expected <= ceiling
    assert got == (expected or None)  # a zero amount is left out, any other is exact


@pytest.fixture
def devnet_treasury(new_storage_url):
    now = [TUESDAY]
    chain = DevnetChain()
    t = Treasury.open(
        new_storage_url("yield.db"),
        master_key=MASTER_KEY,
        chains={CHAIN: chain},
        clock=lambda: now[0],
    )
    yield t, chain, now
    t.close()


def test_the_snapshot_job_reads_every_known_holder_once_per_interval(devnet_treasury):
    """Managed, tracked and virtual wallets of two organizations; a deleted wallet and an
    outside address are not holders. A second pass within the hour takes no snapshot; a
    pass an hour later does, and so does the first pass after Monday 00:00."""
    t, chain, now = devnet_treasury
    acme, globex = (make_tenant(t, name).org for name in ("Acme", "Globex"))
    managed = acme.wallets.create(label="Ops").address
    tracked = globex.wallets.track(address="0x" + "d" * 40, label="Cold").wallet.address
    virtual = globex.virtual_wallet.get().address
    gone = acme.wallets.create(label="Old").address
    outsider = "0x" + "e" * 40
    for address, amount in ((managed, "100"), (tracked, "2.5"), (gone, "7"), (outsider, "9")):
        chain.faucet(address, "c0", amount)
    acme.wallets.delete(gone)
    assert t.run_once()["yield_snapshots"] == 1
    start, end = bounds(period_of(TUESDAY))
    with t.storage.read() as tx:
        (first,) = snapshots(tx, CHAIN, start, end)
    assert first.taken_at == TUESDAY
    one = 10**chain.c0_decimals  # a whole c0 in raw units
    assert first.balances == {managed: 100 * one, tracked: 25 * one // 10}  # virtual: 0
    assert first.apy == project(0, chain.earner_rate_bps()).apy  # net of the fee, as estimates
    chain.faucet(virtual, "c0", "1")
    now[0] = TUESDAY + timedelta(minutes=59)
    assert t.run_once()["yield_snapshots"] == 0
    now[0] = TUESDAY + timedelta(hours=1)
    assert t.run_once()["yield_snapshots"] == 1
    now[0] = end - timedelta(minutes=10)
    assert t.run_once()["yield_snapshots"] == 1
    now[0] = end + timedelta(minutes=1)  # ten minutes later, but a new period
    assert t.run_once()["yield_snapshots"] == 1
    with t.storage.read() as tx:
        taken = snapshots(tx, CHAIN, start, end)
    assert [s.taken_at for s in taken] == [
        TUESDAY,
        TUESDAY + timedelta(hours=1),
        end - timedelta(minutes=10),
    ]
    assert taken[1].balances[virtual] == one
    assert periods.period_of(now[0]) == period_of(TUESDAY) + 1
