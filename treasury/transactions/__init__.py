"""Tracked on-chain transactions: recorded pending, resolved by the indexer job."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .._records.transactions import RecordTransaction
from .models import Recorded, Transaction, TransactionReceipt

if _typing.TYPE_CHECKING:
    from .operations import Transactions


__all__ = ["RecordTransaction", "Recorded", "Transaction", "TransactionReceipt", "Transactions"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"Transactions": ".operations"})
