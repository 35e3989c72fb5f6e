"""Deposit and withdraw preparation: the body, and the steps the caller signs."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from .._infra.models import Address, Body, DecimalText, Resource
from ..money import to_raw


class PrepareSwap(Body):
    """Body of deposit/prepare and withdraw/prepare; `recipient` defaults to `from`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    token: Literal["USDC", "USDT"]
    amount: DecimalText
    from_: Address = Field(alias="from")
    recipient: Address | None = None

    @field_validator("amount")
    @classmethod
    def _positive_decimal(cls, value: str) -> str:
        to_raw(value, len(value.partition(".")[2]))  # its places: the tokens' (`Swaps`)
        return value


class StepTransaction(Resource):
    to: Address
    data: str
    value: str = "0"


class Step(Resource):
    type: Literal["reset-approval", "approval", "swap"]
    description: str
    transaction: StepTransaction


class PrepareSummary(Resource):
    token_in: Address
    token_out: Address
    amount_in: str
    amount_in_raw: str


class Prepared(Resource):
    steps: list[Step]
    summary: PrepareSummary
