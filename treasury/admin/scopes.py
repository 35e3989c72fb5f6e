"""The scopes of an API key and what each grants (DESIGN §3 "Controls").

``read``: every GET but those of webhooks, deliveries, policy and the audit log;
``payments``: read, and every other POST, PATCH and DELETE of wallets, recipients, bank
accounts, transfers, transactions and prepare; ``approve``: read, and approving or
rejecting transfers; ``admin``: everything. A key made without scopes has ``admin``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

ApiScope = Literal["read", "payments", "approve", "admin"]
SCOPES: tuple[str, ...] = get_args(ApiScope)
DEFAULT: tuple[str, ...] = ("admin",)
#: What each scope grants besides itself.
_IMPLIES = {"payments": {"read"}, "approve": {"read"}}


def grants(held: Iterable[str], required: str) -> bool:
    """Whether a key holding `held` may run an operation that requires `required`."""
    return any(
        scope == "admin" or scope == required or required in _IMPLIES.get(scope, ())
        for scope in held
    )


def checked(scopes: Iterable[str] | None) -> list[str]:
    """The scopes to store for a new key: `None` means ``["admin"]``; an unknown scope
    is a `ValueError` naming it. Kept in the order of `SCOPES`, without repeats."""
    if scopes is None:
        return list(DEFAULT)
    if isinstance(scopes, str):
        scopes = [scopes]
    given = list(scopes)
    unknown = [scope for scope in given if scope not in SCOPES]
    if unknown:
        raise ValueError(f"unknown scope {unknown[0]!r}: one of {', '.join(SCOPES)}")
    if not given:
        raise ValueError(f"give at least one scope: {', '.join(SCOPES)}")
    return [scope for scope in SCOPES if scope in given]
