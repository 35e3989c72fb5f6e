"""Tracked on-chain transactions: recorded pending, resolved by the indexer job."""

from .._records.transactions import RecordTransaction
from .models import Recorded, Transaction, TransactionReceipt
from .operations import Transactions

__all__ = ["RecordTransaction", "Recorded", "Transaction", "TransactionReceipt", "Transactions"]
