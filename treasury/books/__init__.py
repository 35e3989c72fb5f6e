"""The books: a journal that always ties out, and says so when it does not (DESIGN §3).

Balances from the journal at any time (`Ledger`), statements (`Statements`), and
reconciliation against the chain, block by block (`ReconciliationGroup`, the
`reconcile` job). The journal is written by the domains that own the facts, through
`treasury._records.journal`, in their own transactions.
"""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import (
    Break,
    LedgerBalance,
    LedgerBalances,
    Reconciliation,
    ReconciliationRun,
    Statement,
    StatementEntry,
)

if _typing.TYPE_CHECKING:
    from .operations import Ledger, ReconciliationGroup, Statements
    from .reconcile import reconcile_books

__all__ = [
    "Break",
    "Ledger",
    "LedgerBalance",
    "LedgerBalances",
    "Reconciliation",
    "ReconciliationGroup",
    "ReconciliationRun",
    "Statement",
    "StatementEntry",
    "Statements",
    "reconcile_books",
]

# The operations and the job are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(
    __name__,
    {
        "Ledger": ".operations",
        "ReconciliationGroup": ".operations",
        "Statements": ".operations",
        "reconcile_books": ".reconcile",
    },
)
