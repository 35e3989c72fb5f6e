"""Transfers: bank ↔ wallet through the fiat provider, USDC ↔ c0 on-chain, in one feed."""

from .models import CreateTransfer, DepositInstructions, Transfer, TransferSide
from .operations import Transfers

__all__ = [
    "CreateTransfer",
    "DepositInstructions",
    "Transfer",
    "TransferSide",
    "Transfers",
]
