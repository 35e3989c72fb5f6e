"""Amounts: decimal strings of whole units and integers of raw units, never floats, and
`Amount`, a value in token units that carries its token."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from .errors import ValidationError

__all__ = ["Amount", "AmountRefused", "to_raw", "to_units"]

_AMOUNT = re.compile(r"(0|[1-9][0-9]*)(\.[0-9]+)?")


def to_raw(amount: str | int | Decimal, decimals: int) -> int:
    """Whole units to raw units, exactly: ``to_raw("250.5", 6) == 250_500_000``.

    `ValueError` unless `amount` is a positive plain decimal with at most `decimals`
    fractional digits (no exponent, no sign). Works on the digits, so any size is exact.
    """
    text = format(amount, "f") if isinstance(amount, Decimal) else str(amount)
    if not _AMOUNT.fullmatch(text):
        raise ValueError(f"not a positive decimal amount: {amount!r}")
    whole, _, fraction = text.partition(".")
    if len(fraction.rstrip("0")) > decimals:
        raise ValueError(f"amount {amount!r} has more than {decimals} decimal places")
    raw = int(whole) * int(10**decimals) + int(fraction[:decimals].ljust(decimals, "0") or "0")
    if raw <= 0:
        raise ValueError(f"amount must be positive, got {amount!r}")
    if raw >= 2**256:
        raise ValueError(f"amount {amount!r} is too large for a token (uint256)")
    return raw


def to_units(raw: int | str, decimals: int) -> str:
    """Raw units to whole units, exactly, without trailing zeros:
    ``to_units(250_500_000, 6) == "250.5"``; the texts people read quote these."""
    whole, fraction = divmod(int(raw), 10**decimals)
    digits = str(fraction).rjust(decimals, "0").rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


class AmountRefused(ValidationError):
    """An amount a token, a wallet or a chain cannot take: more decimal places than the
    token has, more than the balance holds, more than c0 can give back now. A 400 that
    names no request field: the operation that read the amount from its request says
    which field it was."""


@dataclass(frozen=True)
class Amount:
    """An amount of one token, in token units: `value` (a `Decimal`, never a float) and
    `token`, the symbol its chain knows it by (``"USDC"``, ``"c0"``, ``"ETH"``). As
    py-moneyed's `Money` does for currencies, the token travels with the value from the
    request to the chain, where `to_raw` gives the integer of raw units a leg sends; its
    text quotes token units (``str(Amount.of("250.50", "USDC")) == "250.5 USDC"``)."""

    value: Decimal
    token: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, Decimal) or not self.value.is_finite():
            raise TypeError(f"an amount's value is a finite Decimal, not {self.value!r}")

    @classmethod
    def of(cls, value: str | int | Decimal, token: str) -> Amount:
        """An amount from an `int`, a `Decimal` or a decimal string (checked against a
        token's decimals only by `to_raw`)."""
        if isinstance(value, float):
            raise TypeError("amounts are never floats")
        return cls(Decimal(value), token)

    @classmethod
    def from_raw(cls, raw: int | str, decimals: int, token: str) -> Amount:
        """An amount of `raw` units of a token of `decimals`."""
        return cls(Decimal(to_units(raw, decimals)), token)

    def to_raw(self, decimals: int) -> int:
        """Its raw units at the token's `decimals`: `AmountRefused` unless it is a
        positive amount with no more decimal places than the token has, below 2**256."""
        try:  # as given (``"1.10"`` stays so in a refusal's text)
            return to_raw(format(self.value, "f"), decimals)
        except ValueError as error:
            raise AmountRefused(str(error)) from None

    @property
    def units(self) -> str:
        """The value as people read it: a plain decimal without trailing zeros."""
        text = format(self.value.normalize(), "f")
        return "0" if self.value == 0 else text

    def __str__(self) -> str:
        return f"{self.units} {self.token}"
