"""Yield projection for a `c0` balance from the live earner rate (DESIGN §3 "Yield")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

from .._infra.group import Group
from .._infra.models import Address, ListOf
from .._infra.validation import parse_value
from ..errors import UpstreamError
from ..evm.abi import BALANCE_OF, EARNER_RATE, IS_CLAIMED
from ..evm.multicall import multicall
from . import store
from .models import YieldClaim, YieldEstimate, YieldRate
from .precision import CONTEXT as _CTX

FEE = Decimal("0.1")


@dataclass(frozen=True)
class Projection:
    apy: Decimal
    daily: int
    monthly: int
    annual: int


def project(earning: int, rate_bps: int) -> Projection:
    """r = bps / 10 000, continuously compounded; apy = (e^r - 1) x 0.9; yields floored."""
    r = _CTX.divide(Decimal(rate_bps), Decimal(10_000))
    apy = _CTX.multiply(_CTX.subtract(_CTX.exp(r), Decimal(1)), Decimal(1) - FEE)
    growth = _CTX.add(Decimal(1), apy)

    def over(periods: int) -> int:
        factor = _CTX.subtract(_CTX.power(growth, _CTX.divide(Decimal(1), Decimal(periods))), 1)
        return int(_CTX.multiply(Decimal(earning), factor).to_integral_value(ROUND_FLOOR))

    annual = int(_CTX.multiply(Decimal(earning), apy).to_integral_value(ROUND_FLOOR))
    return Projection(apy=apy, daily=over(365), monthly=over(12), annual=annual)


class Yields(Group):
    name = "yields"

    def estimate(self, chain_id: int, address: str) -> YieldEstimate:
        """The projection for `address`'s c0 balance (one multicall: balance, rate; c0's
        decimals as the chain's token metadata holds them)."""
        chains = self._scope.runtime.chains
        chain = chains.get(chain_id)
        address = str(parse_value(Address, address, "query", "address"))
        c0, source = chain.address("c0"), chain.address("earner_rate_source")
        balance, rate = multicall(chain, [(c0, BALANCE_OF, (address,)), (source, EARNER_RATE, ())])
        if balance is None or rate is None:
            raise UpstreamError("c0 or the earner rate source did not answer")
        earning = int(str(balance[0]))
        projection = project(earning, int(str(rate[0])))
        return YieldEstimate(
            earning=str(earning),
            decimals=chains.decimals(chain_id, "c0"),
            rate=YieldRate(apy=float(projection.apy)),
            daily_yield=str(projection.daily),
            monthly_yield=str(projection.monthly),
            annual_yield=str(projection.annual),
        )

    def claims(self, address: str, *, chain_id: int | None = None) -> ListOf[YieldClaim]:
        """`address`'s claims of published periods on `chain_id` (default the primary
        chain), newest first, each `claimed` or `unclaimed` as the distributor says."""
        address = str(parse_value(Address, address, "path", "address"))
        runtime = self._scope.runtime
        chain_id = runtime.chains.primary if chain_id is None else runtime.chains.require(chain_id)
        with runtime.storage.read() as tx:
            rows = store.claims(tx, chain_id, address)
        chain = runtime.chains.get(chain_id)
        distributor = chain.addresses.get("yield_distributor")
        paid: list[tuple[object, ...] | None] = [None] * len(rows)
        if distributor is not None and rows:
            calls = [(distributor, IS_CLAIMED, (r["period_id"], r["leaf_index"])) for r in rows]
            paid = multicall(chain, calls)
            if any(answer is None for answer in paid):
                raise UpstreamError("the yield distributor did not answer")
        return ListOf[YieldClaim](
            data=[
                YieldClaim(
                    chain_id=chain_id,
                    distributor=distributor,
                    period_id=str(row["period_id"]),
                    status="claimed" if answer and answer[0] else "unclaimed",
                    root=row["root"],
                    index=row["leaf_index"],
                    account=address,
                    amount=row["amount"],
                    proof=json.loads(row["proof"]),
                )
                for row, answer in zip(rows, paid, strict=True)
            ]
        )
