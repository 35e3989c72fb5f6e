"""Deposits: money that arrives from outside into an organization's wallets, found from
the tokens' ``Transfer`` logs and announced as ``deposit.received``."""

from .detector import detect_deposits

__all__ = ["detect_deposits"]
