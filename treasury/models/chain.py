"""Chain-scoped resources: balances, prepare steps, tracked transactions, yield estimates."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints, field_validator

from .common import HASH_PATTERN, Address, Body, Resource, Timestamped

TxHash = Annotated[str, StringConstraints(pattern=HASH_PATTERN), Field()]
RawAmount = Annotated[str, StringConstraints(pattern=r"^(0|[1-9][0-9]{0,77})$")]
TransactionType = Literal["deposit", "withdrawal", "yield", "approval", "other"]
TransactionStatus = Literal["pending", "confirmed", "failed"]

_DECIMAL = re.compile(r"^(0|[1-9][0-9]*)(\.[0-9]+)?$")


class TokenBalance(Resource):
    token: Address
    name: str
    symbol: str
    raw: str
    decimals: int


class PrepareSwap(Body):
    """Body of deposit/prepare and withdraw/prepare; `recipient` defaults to `from`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    token: Literal["USDC", "USDT"]
    amount: str
    from_: Address = Field(alias="from")
    recipient: Address | None = None

    @field_validator("amount")
    @classmethod
    def _positive_decimal(cls, value: str) -> str:
        if not _DECIMAL.match(value) or Decimal(value) <= 0:
            raise ValueError("must be a positive decimal string such as '10.5'")
        if len(value.partition(".")[2]) > 6:
            raise ValueError("must have at most 6 decimal places")
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


class RecordTransaction(Body):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    hash: TxHash
    type: TransactionType
    from_: Address = Field(alias="from")
    contract: Address
    token: Address
    amount: RawAmount
    wallet_id: int = Field(alias="walletId")

    @field_validator("hash")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()


class Recorded(Resource):
    hash: str
    chain_id: int
    status: TransactionStatus


class TransactionReceipt(Timestamped):
    chain_id: int
    hash: str
    from_: str = Field(alias="from")
    to: str
    transaction_index: int
    block_hash: str
    block_number: int
    type: int
    contract_address: str
    status: int
    root: str


class Transaction(Timestamped):
    hash: str
    chain_id: int
    status: TransactionStatus
    type: TransactionType
    from_: str = Field(alias="from")
    contract: str
    token: str
    amount: str
    organization_id: str
    wallet_id: int
    receipt: TransactionReceipt | None = None


class YieldRate(Resource):
    apy: float


class YieldEstimate(Resource):
    earning: str
    decimals: int
    rate: YieldRate
    daily_yield: str
    monthly_yield: str
    annual_yield: str


class AddressQuery(Body):
    model_config = ConfigDict(extra="ignore", frozen=True)

    address: Address


__all__ = [
    "AddressQuery",
    "PrepareSummary",
    "PrepareSwap",
    "Prepared",
    "RecordTransaction",
    "Recorded",
    "Step",
    "StepTransaction",
    "TokenBalance",
    "Transaction",
    "TransactionReceipt",
    "YieldEstimate",
    "YieldRate",
]
