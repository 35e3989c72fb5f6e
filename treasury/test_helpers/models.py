"""The faucet of the test helpers: what to fund, and what was sent."""

from __future__ import annotations

from typing import Literal

from .._infra.models import Address, Body, DecimalText, Resource

Token = Literal["USDC", "USDT", "c0", "ETH"]


class Faucet(Body):
    address: Address
    token: Token
    amount: DecimalText  # at most as fine as the token's decimals (checked by `TestHelpers`)


class Funded(Resource):
    chain_id: int
    address: Address
    token: Token
    amount: str
    transaction_hash: str
