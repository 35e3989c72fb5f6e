"""Shared field types and base classes of every request and response model."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    computed_field,
)
from pydantic.alias_generators import to_camel

from . import replays

ADDRESS_PATTERN = r"^0x[a-fA-F0-9]{40}$"
HASH_PATTERN = r"^0x[a-fA-F0-9]{64}$"
ZERO_ADDRESS = "0x" + "0" * 40


def _lowercase(value: str) -> str:
    return value.lower()


def _not_zero(value: str) -> str:
    if value == ZERO_ADDRESS:
        raise ValueError("must not be the zero address")
    return value


def _checksummed(value: str) -> str:
    """An address in mixed case must carry its EIP-55 checksum (a mistyped character
    is then caught); all-lowercase and all-uppercase carry none."""
    digits = value[2:]
    if digits.lower() != digits and digits.upper() != digits:
        from eth_utils.address import to_checksum_address  # only for mixed case

        if to_checksum_address(value) != value:
            raise ValueError("mixed-case address with an invalid EIP-55 checksum")
    return value


Address = Annotated[
    str,
    StringConstraints(pattern=ADDRESS_PATTERN),
    AfterValidator(_checksummed),
    AfterValidator(_lowercase),
]
"""`0x` + 40 hex characters (mixed case only with a valid EIP-55 checksum), lowercase out."""

NonZeroAddress = Annotated[Address, AfterValidator(_not_zero)]


def _decimal_text(value: Any) -> Any:
    """An `int` or a `Decimal` as its plain decimal string; a float refused (inexact)."""
    if isinstance(value, float):
        shown = format(Decimal(repr(value)), "f")  # 1e+20 -> "100000000000000000000"
        raise ValueError(
            f"a float ({value!r}) is not taken, floats are inexact: give a decimal string"
            f' such as "{shown}", an int or a Decimal'
        )
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, Decimal) and value.is_finite():
        return format(value, "f")
    return value


DecimalText = Annotated[str, BeforeValidator(_decimal_text)]
"""An amount in token units: a decimal string, or an `int` or `Decimal` given in Python
(kept as its plain decimal string); a float is refused."""


#: What free text may not hold: control characters (C0, DEL, C1), line and paragraph
#: separators, lone surrogates, and the bidirectional marks, embeddings, overrides and
#: isolates that make text read otherwise than it is stored (U+202E "right-to-left
#: override" shows ``exe.txt`` for ``txt.exe``).
_NOT_TEXT = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def plain_text(value: str) -> str:
    """`value` unless it holds a character of `_NOT_TEXT` (`ValueError` naming it)."""
    if found := _NOT_TEXT.search(value):
        raise ValueError(
            f"must not contain control or bidirectional formatting characters"
            f" (U+{ord(found.group()):04X} at {found.start()})"
        )
    return value


PlainText = AfterValidator(plain_text)
"""The rule of every free-text field (labels, names, addresses, references)."""

Label = Annotated[str, StringConstraints(min_length=1, max_length=100), PlainText]
"""A human-readable name of 1 to 100 characters, without control or bidi characters."""

RowId = Annotated[int, Field(ge=1, le=2**63 - 1)]
"""An integer id as the API shows it (per organization) and databases store it (64-bit)."""

ChainId = Annotated[int, Field(ge=1, le=2**63 - 1)]
"""An EVM chain id."""

SortField = Literal["created_at", "label"]
SortOrder = Literal["asc", "desc"]

T = TypeVar("T")


class Body(BaseModel):
    """A request body: unknown fields are refused, strings are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Resource(BaseModel):
    """A response resource: snake_case in Python, camelCase in JSON."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        frozen=True,
    )

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready dict that the HTTP API returns."""
        return self.model_dump(mode="json")

    def __eq__(self, other: object) -> bool:
        """Equal when the JSON is equal: a replay equals the original."""
        if not isinstance(other, Resource):
            return NotImplemented
        return type(self) is type(other) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    @property
    def replayed(self) -> bool:
        """True when an Idempotency-Key replayed this answer instead of running again
        (over HTTP, the ``Idempotent-Replayed`` header). Not a field: the idempotency
        store, or the typed client, marks the answer (`treasury._infra.replays`)."""
        return replays.replayed(self)


class Timestamped(Resource):
    created_at: datetime
    updated_at: datetime


class _Items(Resource, Generic[T]):
    """A list answer: iterating over it, ``len()`` and indexing reach its items (`data`),
    not the model's fields as a pydantic model's iteration would."""

    data: list[T]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def count(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[T]:  # type: ignore[override]
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> T:
        return self.data[index]


class ListOf(_Items[T], Generic[T]):
    """`{"data": [...], "count": n}` with `count == len(data)`; iterates over `data`."""


class PageQuery(Body):
    """The query of a keyset-paginated list: `limit` and the `cursor` of the last page."""

    model_config = ConfigDict(extra="ignore", strict=False, frozen=True)

    limit: Annotated[int, Field(ge=1, le=200)] = 50
    cursor: Annotated[str, StringConstraints(max_length=512)] | None = None


class Page(_Items[T], Generic[T]):
    """`{"data": [...], "nextCursor": str | null, "count": n}`, newest first; `next_cursor`
    is None on the last page. Iterates over `data`."""

    next_cursor: str | None


class ListQuery(Body):
    """`sort` and `order` of the wallet and recipient lists."""

    model_config = ConfigDict(extra="ignore", strict=False, frozen=True)

    sort: SortField = "created_at"
    order: SortOrder = "asc"


class Deleted(Resource):
    deleted: bool = True


@dataclass(frozen=True)
class CsvTable(Generic[T]):
    """How a list is written as CSV (``text/csv``): its header row, and each item's row
    (None as an empty cell)."""

    columns: tuple[str, ...]
    row: Callable[[T], Sequence[str | None]]
    #: Columns of signed decimal numbers the service writes itself (a statement's
    #: amounts): written as they are, a ``-`` being their sign, never a formula.
    numbers: frozenset[str] = frozenset()

    def cells(self, item: T) -> list[str | None]:
        """`item`'s row as written: each text cell that a spreadsheet would run as a
        formula (starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return)
        prefixed with ``'`` (OWASP's CSV injection rule); a cell of `numbers` that is a
        plain signed decimal is written as it is."""
        return [
            cell if name in self.numbers and _signed_decimal(cell) else neutralised(cell)
            for name, cell in zip(self.columns, self.row(item), strict=True)
        ]


def _signed_decimal(cell: str | None) -> bool:
    return cell is not None and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", cell) is not None


#: What starts a formula in a spreadsheet (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(cell: str | None) -> str | None:
    """A CSV cell a spreadsheet shows as text: ``'`` before a formula's first character."""
    if cell and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell
