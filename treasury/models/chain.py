"""Chain-scoped resources: balances, prepare steps, tracked transactions, yield estimates."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, field_validator

from ..money import to_raw
from .common import HASH_PATTERN, Address, Body, Resource, RowId, Timestamped

TxHash = Annotated[str, StringConstraints(pattern=HASH_PATTERN), Field()]


def _uint256(value: str) -> str:
    if int(value) >= 2**256:
        raise ValueError("must fit in uint256")
    return value


RawAmount = Annotated[
    str, StringConstraints(pattern=r"^(0|[1-9][0-9]{0,77})$"), AfterValidator(_uint256)
]
TransactionType = Literal["deposit", "withdrawal", "yield", "approval", "other"]
TransactionStatus = Literal["pending", "confirmed", "failed"]


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
        to_raw(value, 6)  # a positive decimal with at most 6 places (the stablecoin side)
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
    wallet_id: RowId = Field(alias="walletId")

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


__all__ = [
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
