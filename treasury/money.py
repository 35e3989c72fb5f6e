"""Amounts: decimal strings of whole units and integers of raw units, never floats."""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = ["to_raw", "to_units"]

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
