"""The books as the API shows them: a wallet's balances from the journal, statements,
reconciliation runs and breaks (DESIGN §3 "The books")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from .._infra.models import Address, Body, ChainId, CsvTable, PlainText, Resource

Token = Literal["USDC", "USDT", "c0"]
BreakKind = Literal[
    "unexplained_inflow", "unexplained_outflow", "missing_movement", "provider_mismatch"
]
BreakStatus = Literal["open", "resolved"]


def _in_range(moment: datetime) -> datetime:
    """A time between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, as UTC."""
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError("must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z") from None


Moment = Annotated[AwareDatetime, AfterValidator(_in_range)]
"""An ISO 8601 time with its time zone, between the years 1 and 9999."""


class _Query(Body):
    model_config = ConfigDict(extra="ignore", strict=False, frozen=True, populate_by_name=True)


# -- balances from the journal -------------------------------------------------------------


class LedgerQuery(_Query):
    """`at`: the service clock's time the balances are for (default now)."""

    at: Moment | None = None


class LedgerBalance(Resource):
    """One token of a wallet on one chain, from the journal, in token units: `posted`
    (the postings committed before `at`), `pending` (what transfers accepted before
    `at` and not final then hold of it, outgoing, not posted yet), `available` = posted -
    pending."""

    chain_id: int
    token: Token
    posted: str
    pending: str
    available: str


class LedgerBalances(Resource):
    wallet: str
    at: datetime
    balances: list[LedgerBalance]


# -- statements ----------------------------------------------------------------------------


class StatementQuery(_Query):
    """A wallet's entries in one token, `from` (included) to `to` (excluded); `chainId`
    defaults to the primary chain, `from` to the beginning, `to` to now."""

    wallet: Address
    token: Token
    from_: Moment | None = Field(default=None, alias="from")
    to: Moment | None = None
    chain_id: ChainId | None = Field(default=None, alias="chainId")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.from_ is not None and self.to is not None and self.to <= self.from_:
            raise ValueError("to must be after from")
        return self


class StatementEntry(Resource):
    """One posting to the wallet: `amount` signed (token units), `balance` after it, what
    it records (`kind`) and the fact it came from (a transfer, a deposit, a transaction)."""

    at: datetime
    amount: str
    balance: str
    transfer_id: str | None
    deposit_id: str | None
    transaction_hash: str | None
    kind: str


class Statement(Resource):
    """`opening` + Σ `entries`' amounts = `closing`, exactly, for any window."""

    wallet: str
    chain_id: int
    token: Token
    from_: datetime | None = Field(alias="from")
    to: datetime
    opening: str
    closing: str
    entries: list[StatementEntry]


class StatementLine(Resource):
    """A row of a statement's CSV: its opening, each entry, its closing."""

    at: datetime | None
    amount: str | None
    balance: str
    transfer_id: str | None = None
    deposit_id: str | None = None
    transaction_hash: str | None = None
    kind: str


def _line(line: StatementLine) -> list[str | None]:
    shown = line.model_dump(mode="json", by_alias=True)
    return [
        shown["at"],
        shown["kind"],
        shown["amount"],
        shown["balance"],
        shown["transferId"],
        shown["depositId"],
        shown["transactionHash"],
    ]


#: A statement as CSV: an ``opening`` row, one row per entry, a ``closing`` row.
STATEMENT_CSV: CsvTable[StatementLine] = CsvTable(
    ("at", "kind", "amount", "balance", "transferId", "depositId", "transactionHash"),
    _line,
    numbers=frozenset({"amount", "balance"}),
)


# -- reconciliation ------------------------------------------------------------------------


class RunReconciliation(Body):
    """Which chain to reconcile (default the primary chain)."""

    chain_id: ChainId | None = Field(default=None, alias="chainId")

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


class ReconciliationRun(Resource):
    """One run over an organization's (wallet, token) pairs on a chain, read at one
    height (`block_number`), and its fiat transfers against the provider: `tied_out` when
    the journal's posted balance equals the chain's for every pair and the provider's for
    every fiat transfer, with no break open; `pairs_tied_out` of `pairs` did; `in_flight`
    differed only by movements of the service's own still being settled (or a provider
    state not applied yet); `breaks_open` after it. `id`: its number in the
    organization."""

    id: int
    at: datetime
    chain_id: int
    block_number: int
    pairs: int
    tied_out: bool
    pairs_tied_out: int
    in_flight: int
    breaks_open: int


class ResolvedBy(Resource):
    api_key_id: str | None = None
    user_id: str | None = None
    admin: bool | None = None


class Break(Resource):
    """A difference between the books and the chain (or the provider): `difference` =
    `actual` - `expected` (token units) at `block_number`; `evidence`: the transfer id
    and leg hashes of a missing movement, the Transfer-log hashes found for the
    unexplained kinds."""

    id: int
    kind: BreakKind
    chain_id: int
    wallet: str
    token: Token
    expected: str
    actual: str
    difference: str
    block_number: int
    evidence: list[str]
    status: BreakStatus
    opened_at: datetime
    resolved_at: datetime | None
    resolved_by: ResolvedBy | None = None
    note: str | None = None


class Reconciliation(Resource):
    last_run: ReconciliationRun | None
    open: list[Break]


class BreaksQuery(_Query):
    status: BreakStatus | None = None
    limit: Annotated[int, Field(ge=1, le=200)] = 50
    cursor: Annotated[str, StringConstraints(max_length=512)] | None = None


class ResolveBreak(Body):
    """Why the difference is accepted (recorded with who accepted it)."""

    note: Annotated[str, StringConstraints(min_length=1, max_length=1000), PlainText]


def break_of(data: dict[str, Any]) -> Break:
    """A break from its JSON shape (`treasury._records.breaks.shown`)."""
    return Break.model_validate(data)
