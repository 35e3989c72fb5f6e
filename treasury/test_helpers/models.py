"""The faucet of the test helpers: what to fund, and what was sent."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator

from .._infra.models import Address, Body, DecimalText, Resource

Token = Literal["USDC", "USDT", "c0", "ETH"]
_SYMBOLS = {symbol.lower(): symbol for symbol in ("USDC", "USDT", "c0", "ETH")}


def _symbol(value: object) -> object:
    """A token's symbol in any case (``usdc``, as a transfer's currency is written) as
    the chain spells it (``USDC``); anything else is left for the Literal to refuse."""
    return _SYMBOLS.get(value.lower(), value) if isinstance(value, str) else value


class Faucet(Body):
    address: Address
    token: Annotated[Token, BeforeValidator(_symbol)]  # any case: usdc, USDC
    amount: DecimalText  # at most as fine as the token's decimals (checked by `TestHelpers`)


class Funded(Resource):
    chain_id: int
    address: Address
    token: Token
    amount: str
    transaction_hash: str
