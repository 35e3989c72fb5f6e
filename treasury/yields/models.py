"""Yield estimates of a `c0` balance."""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict

from .._infra.models import Address, Body, Resource


class YieldRate(Resource):
    apy: float  # the one float of the API: the specification asks for a number


class YieldEstimate(Resource):
    earning: str
    decimals: int
    rate: YieldRate
    daily_yield: str
    monthly_yield: str
    annual_yield: str


class YieldQuery(Body):
    """The query of the yield endpoints: the address whose `c0` balance is projected."""

    model_config = ConfigDict(extra="ignore", strict=False, frozen=True)

    address: Address


class YieldArtifact(Resource):
    """A published period of yield distributions (listed by `GET /v1/yield/artifacts`)."""

    period_id: str
    chain_id: int
    root: str
    total: str
    count: int
    starts_at: datetime
    ends_at: datetime
    published_at: datetime
