"""Transfers as the API takes and shows them (SPEC §2 Transfer and TransferSide, §4).

The create body carries the rail rules: which fields each payment rail requires and
refuses, and the four accepted pairings, each named by what it does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from .._infra.models import (
    Address,
    Body,
    CsvTable,
    DecimalText,
    PlainText,
    Resource,
    Timestamped,
)
from .._records.bank_accounts import BankAccountSummary, ExternalAccountId
from .._records.transfers import ApprovalStatus, Status
from ..errors import TreasuryError
from ..money import to_raw

if TYPE_CHECKING:
    from ..backends.fiat.base import BankDeposit

Currency = Literal["usd", "usdc", "usdt", "c0"]
Pairing = Literal["onramp", "offramp", "deposit", "withdraw", "sweep"]
DECIMALS = 6  # at most 6 decimal places on either side

#: (source currency, source rail, destination currency, destination rail) -> pairing
PAIRINGS: dict[tuple[str, str, str, str], Pairing] = {
    ("usd", "ach_push", "usdc", "ethereum"): "onramp",
    ("usdc", "ethereum", "usd", "ach"): "offramp",
    ("usdc", "ethereum", "c0", "ethereum"): "deposit",
    ("c0", "ethereum", "usdc", "ethereum"): "withdraw",
}
ONCHAIN: frozenset[Pairing] = frozenset({"deposit", "withdraw", "sweep"})
FIAT: frozenset[Pairing] = frozenset({"onramp", "offramp"})
#: Why a transfer that is neither final nor moving waits (DESIGN: "Why a transfer waits").
WaitingReason = Literal[
    "approval", "confirmations", "insufficient gas", "fee above cap", "nonce", "provider"
]


def positive_amount(value: str) -> str:
    """A positive decimal string with at most 6 decimal places (`ValueError` otherwise)."""
    to_raw(value, DECIMALS)
    return value


_ZERO = re.compile(r"0+(\.0+)?")


def fee_amount(value: str) -> str:
    """A decimal string ≥ 0 with at most 6 decimal places."""
    if _ZERO.fullmatch(value):
        return value  # zero, in any plain spelling such as "0" or "0.00"
    return positive_amount(value)


class Source(Body):
    currency: Literal["usd", "usdc", "c0"]
    payment_rail: Literal["ach_push", "ethereum"]
    from_address: Address | None = None
    external_account_id: ExternalAccountId | None = None

    @model_validator(mode="after")
    def _rail(self) -> Self:
        _rail_fields(self.payment_rail == "ethereum", self.from_address, self.external_account_id)
        return self


class Destination(Body):
    currency: Literal["usd", "usdc", "c0"]
    payment_rail: Literal["ach", "ethereum"]
    to_address: Address | None = None
    external_account_id: ExternalAccountId | None = None

    @model_validator(mode="after")
    def _rail(self) -> Self:
        _rail_fields(self.payment_rail == "ethereum", self.to_address, self.external_account_id)
        return self


def _rail_fields(on_chain: bool, address: str | None, bank: str | None) -> None:
    """The ethereum rail takes an address; a bank rail an external_account_id."""
    if on_chain and address is None:
        raise ValueError("an address is required on the ethereum rail")
    if on_chain and bank is not None:
        raise ValueError("external_account_id is not taken on the ethereum rail")
    if not on_chain and bank is None:
        raise ValueError("external_account_id is required on a bank rail")
    if not on_chain and address is not None:
        raise ValueError("an address is not taken on a bank rail")


class CreateTransfer(Body):
    amount: Annotated[DecimalText, StringConstraints(max_length=100)]
    client_reference_id: (
        Annotated[str, StringConstraints(min_length=1, max_length=256), PlainText] | None
    ) = None
    developer_fee: Annotated[DecimalText, StringConstraints(max_length=100)] | None = None
    source: Source
    destination: Destination

    @field_validator("amount")
    @classmethod
    def _amount(cls, value: str) -> str:
        return positive_amount(value)

    @field_validator("developer_fee")
    @classmethod
    def _fee(cls, value: str | None) -> str | None:
        return None if value is None else fee_amount(value)

    @property
    def pairing(self) -> Pairing | None:
        """Which of the four accepted pairings this is; None for any other."""
        key = (
            self.source.currency,
            self.source.payment_rail,
            self.destination.currency,
            self.destination.payment_rail,
        )
        return PAIRINGS.get(key)

    def problems(self) -> list[dict[str, str]]:
        """What the rules across fields refuse, by field (the pairing, the fee)."""
        pairing, fee = self.pairing, Decimal(self.developer_fee or "0")
        if pairing is None:
            accepted = "; ".join(f"{a}/{b} -> {c}/{d}" for a, b, c, d in PAIRINGS)
            return [_problem("destination", f"not an accepted pairing; accepted: {accepted}")]
        if pairing in ONCHAIN and fee != 0:
            return [_problem("developer_fee", "is not taken on an on-chain pairing")]
        if fee >= Decimal(self.amount):
            return [_problem("developer_fee", "must be less than amount")]
        return []


def _problem(field: str, message: str) -> dict[str, str]:
    return {"location": "body", "field": field, "message": message}


class TransferSide(Resource):
    """Exactly one of `address` and `bank_account` is set."""

    address: str | None
    bank_account: BankAccountSummary | None
    chain_id: int | None
    currency: Currency
    amount: str


class DepositInstructions(Resource):
    """Where and how to push the USD of an on-ramp (the provider's bank details)."""

    amount: str
    currency: Literal["usd"] = "usd"
    bank_name: str
    bank_address: str
    routing_number: str
    account_number: str
    beneficiary_name: str
    beneficiary_address: str
    message: str

    @classmethod
    def of(cls, deposit: BankDeposit, amount: str) -> Self:
        # The provider's BankDeposit, whose fields these are, and the on-ramp's amount.
        return cls(amount=amount, **asdict(deposit))


class Transfer(Timestamped):
    """SPEC's seven fields, plus `client_reference_id`, on on-ramps
    `deposit_instructions` (null elsewhere), `failure_reason` (null unless failed),
    `approval_status` (``not_required`` unless the policy's threshold asked for one) and
    `waiting_reason` (null when final or moving, else why it waits)."""

    id: str
    from_: TransferSide = Field(alias="from")
    to: TransferSide
    status: Status
    transaction_hash: str | None
    client_reference_id: str | None = None
    deposit_instructions: DepositInstructions | None = None
    failure_reason: str | None = None
    approval_status: ApprovalStatus = "not_required"
    waiting_reason: WaitingReason | None = None


#: The most transfers one payout run (`POST /v1/transfers/batch`) may carry.
BATCH_MAX = 1_000


class CreateTransferBatch(Body):
    """A payout run: 1 to 1,000 transfer bodies (each as `POST /v1/transfers` takes it,
    judged on its own: an item that is not a valid body is refused alone), and whether
    they are accepted all together or none (`atomic`)."""

    items: Annotated[list[Any], Field(min_length=1, max_length=BATCH_MAX)]
    atomic: bool = False

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """Its items as what they should be: transfer bodies (each is checked alone)."""
        schema = handler.resolve_ref_schema(handler(core_schema))
        items = schema["properties"]["items"]
        items["items"] = handler(CreateTransfer.__pydantic_core_schema__)
        items["description"] = "Transfer bodies, as POST /v1/transfers takes them"
        return schema


class BatchItem(Resource):
    """One item of a payout run's answer: its `index` in the request, `status` the HTTP
    status `POST /v1/transfers` would answer for it (201, or its 4xx or 5xx), and either
    `transfer` (the 201 body) or `error` (the error body)."""

    index: int
    status: int
    transfer: Transfer | None = None
    error: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _one_of(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        # (no return annotation: pydantic would take it as the answer's JSON Schema)
        shown = handler(self)
        absent = [name for name in ("transfer", "error") if shown.get(name) is None]
        return {name: value for name, value in shown.items() if name not in absent}

    @property
    def accepted(self) -> bool:
        """Whether the item was accepted (201): its transfer will end final."""
        return self.transfer is not None

    def exception(self) -> TreasuryError | None:
        """The item's error as the library's class (`ValidationError`, ...), or None."""
        if self.error is None:
            return None
        return TreasuryError.from_body(self.status, self.error)

    def result(self) -> Transfer:
        """The item's transfer; its error raised if it was refused."""
        if self.transfer is None:
            error = self.exception()
            raise error if error is not None else TreasuryError("no transfer and no error")
        return self.transfer


class TransferBatch(Resource):
    """The answer of a payout run: one `BatchItem` per item, in the request's order.
    Iterating over it, ``len()`` and indexing reach the items."""

    data: list[BatchItem]

    def __iter__(self) -> Iterator[BatchItem]:  # type: ignore[override]
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> BatchItem:
        return self.data[index]


def _in_range(moment: datetime) -> datetime:
    """A bound between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, as UTC (a time
    zone can carry a date past either end, where Python's datetime overflows)."""
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError("must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z") from None


class ExportQuery(Body):
    """The times between which transfers are exported: created at or after `from`,
    before `to` (ISO 8601, with a time zone)."""

    model_config = ConfigDict(extra="ignore", strict=False, frozen=True, populate_by_name=True)

    from_: Annotated[AwareDatetime, AfterValidator(_in_range)] = Field(alias="from")
    to: Annotated[AwareDatetime, AfterValidator(_in_range)]

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.to <= self.from_:
            raise ValueError("to must be after from")
        return self


def _export_row(transfer: Transfer) -> list[str | None]:
    shown = transfer.model_dump(mode="json", by_alias=True)
    source, destination = shown["from"], shown["to"]
    return [
        shown["id"],
        shown["createdAt"],
        shown["updatedAt"],
        shown["status"],
        source["currency"],
        source["amount"],
        source["address"],
        destination["currency"],
        destination["amount"],
        destination["address"],
        shown["transactionHash"],
        shown["clientReferenceId"],
        shown["failureReason"],
    ]


#: The CSV export of the feed (DESIGN §3 Controls): its columns, in this order.
EXPORT: CsvTable[Transfer] = CsvTable(
    (
        "id",
        "createdAt",
        "updatedAt",
        "status",
        "fromCurrency",
        "fromAmount",
        "fromAddress",
        "toCurrency",
        "toAmount",
        "toAddress",
        "transactionHash",
        "clientReferenceId",
        "failureReason",
    ),
    _export_row,
)
