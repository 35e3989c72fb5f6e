"""The books: a journal that always ties out, and says so when it does not (DESIGN §3).

Balances from the journal at any time (`Ledger`), statements (`Statements`), and
reconciliation against the chain, block by block (`ReconciliationGroup`, the
`reconcile` job). The journal is written by the domains that own the facts, through
`treasury._records.journal`, in their own transactions.
"""

from .models import (
    Break,
    LedgerBalance,
    LedgerBalances,
    Reconciliation,
    ReconciliationRun,
    Statement,
    StatementEntry,
)
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
