"""Yield estimates of a `c0` balance."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel

from .._infra.models import Address, Body, ChainId, Resource


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


class YieldLeaf(Resource):
    """One holder's claim in a period: its leaf values and its merkle proof."""

    index: int
    account: str
    amount: str
    proof: list[str]


class YieldPeriod(YieldArtifact):
    """A published period whole (``GET /v1/yield/artifacts?periodId=N``): its leaves with
    their proofs, and the OpenZeppelin ``StandardMerkleTree`` dump (``tree``)."""

    leaf_encoding: list[str]
    leaves: list[YieldLeaf]
    tree: dict[str, Any]


PeriodId = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,12}$")]
"""A period's id as the API shows it: the decimal string of its week number."""

_QUERY = ConfigDict(
    extra="ignore", strict=False, frozen=True, alias_generator=to_camel, populate_by_name=True
)


class ArtifactsQuery(Body):
    """``?chainId=`` of the published periods (default every chain)."""

    model_config = _QUERY

    chain_id: ChainId | None = None


class ArtifactQuery(Body):
    """``?periodId=N`` (and ``chainId``, default the primary chain): that period whole."""

    model_config = _QUERY

    period_id: PeriodId | None = None
    chain_id: ChainId | None = None


class ClaimsQuery(Body):
    """``?chainId=`` of an address's claims (default the primary chain)."""

    model_config = _QUERY

    chain_id: ChainId | None = None


class YieldClaim(Resource):
    """One period's claim of an address, and whether the distributor has paid it."""

    chain_id: int
    distributor: str | None
    period_id: str
    status: Literal["claimed", "unclaimed"]
    root: str
    index: int
    account: str
    amount: str
    proof: list[str]
