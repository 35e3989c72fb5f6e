"""Token balances of an address."""

from __future__ import annotations

from .._infra.models import Address, Resource


class TokenBalance(Resource):
    token: Address
    name: str
    symbol: str
    raw: str
    decimals: int
