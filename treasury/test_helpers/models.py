"""The faucet of the test helpers: what to fund, and what was sent."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from .._infra.models import Address, Body, DecimalText, Resource
from ..money import to_raw

Token = Literal["USDC", "USDT", "c0", "ETH"]
DECIMALS: dict[str, int] = {"USDC": 6, "USDT": 6, "c0": 18, "ETH": 18}


class Faucet(Body):
    address: Address
    token: Token
    amount: DecimalText

    @model_validator(mode="after")
    def _amount_fits_the_token(self) -> Self:
        to_raw(self.amount, DECIMALS[self.token])  # ValueError: a 400 on this body
        return self


class Funded(Resource):
    chain_id: int
    address: Address
    token: Token
    amount: str
    transaction_hash: str
