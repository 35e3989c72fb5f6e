"""Tracked on-chain transactions: recorded pending, resolved by the indexer job."""

from .models import Recorded, RecordTransaction, Transaction, TransactionReceipt
from .operations import Transactions

__all__ = ["RecordTransaction", "Recorded", "Transaction", "TransactionReceipt", "Transactions"]
