"""The yield formula of DESIGN §3, checked against an independent Decimal computation."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treasury.money import to_raw
from treasury.yields import project


def reference(earning: int, bps: int) -> tuple[Decimal, int, int, int]:
    with localcontext() as ctx:
        ctx.prec = 50
        apy = ((Decimal(bps) / 10_000).exp() - 1) * Decimal("0.9")
        annual = math.floor(earning * apy)
        monthly = math.floor(earning * ((1 + apy) ** (Decimal(1) / 12) - 1))
        daily = math.floor(earning * ((1 + apy) ** (Decimal(1) / 365) - 1))
    return apy, daily, monthly, annual


@settings(deadline=None)
@given(
    earning=st.integers(min_value=0, max_value=10**30),  # up to a trillion c0 (18 decimals)
    bps=st.integers(min_value=0, max_value=100_000),  # up to 1000 % a year
)
def test_projection_matches_the_formula(earning, bps):
    got = project(earning, bps)
    apy, daily, monthly, annual = reference(earning, bps)
    assert got.apy == apy
    assert (got.daily, got.monthly, got.annual) == (daily, monthly, annual)
    assert 0 <= got.daily <= got.monthly <= got.annual


def test_the_devnet_default_rate():
    p = project(10**24, 415)  # one million c0 at 4.15 %
    assert math.isclose(float(p.apy), (math.exp(0.0415) - 1) * 0.9, rel_tol=1e-12)
    assert math.isclose(p.annual / 1e18, 1e6 * (math.exp(0.0415) - 1) * 0.9, rel_tol=1e-12)
    assert math.isclose(p.daily * 365 / p.annual, 1, rel_tol=0.02)  # compounding is small


def test_the_largest_rate_the_source_can_report_does_not_break():
    assert project(10**18, 2**32 - 1).annual > 0


@given(
    whole=st.integers(min_value=0, max_value=10**20),
    fraction=st.text(alphabet="0123456789", max_size=6),
    decimals=st.sampled_from([6, 18]),
)
def test_to_raw_is_exact(whole, fraction, decimals):
    amount = f"{whole}.{fraction}" if fraction else str(whole)
    expected = int(Decimal(amount) * 10**decimals)
    if expected == 0:
        with pytest.raises(ValueError, match="positive"):
            to_raw(amount, decimals)
    else:
        assert to_raw(amount, decimals) == expected
        assert to_raw(Decimal(amount), decimals) == expected


@pytest.mark.parametrize("bad", ["-1", "1e3", "1.", ".5", "01", "1.2345678", " 1", "abc", "NaN"])
def test_to_raw_refuses(bad):
    with pytest.raises(ValueError):
        to_raw(bad, 6)
