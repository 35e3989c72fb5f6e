"""The precision of every yield figure, estimates and periods alike (DESIGN §3 "Yield")."""

from decimal import Context

DIGITS = 50
CONTEXT = Context(prec=DIGITS)
"""The `Decimal` context of yield arithmetic: 50 significant digits, half-even rounding."""
