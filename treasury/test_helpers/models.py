"""The faucet of the test helpers: what to fund, and what was sent."""

from __future__ import annotations

from typing import Literal

from .._infra.models import Address, Body, DecimalText, Resource

Token = Literal["USDC", "USDT", "c0", "ETH"]


class Faucet(Body):
    """`amount` in whole units, at most as fine as the token's decimals (read from the
    chain where the faucet is asked)."""

    address: Address
    token: Token
    amount: DecimalText


class Funded(Resource):
    chain_id: int
    address: Address
    token: Token
    amount: str
    transaction_hash: str
