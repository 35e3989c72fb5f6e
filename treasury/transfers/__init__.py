"""Transfers: bank ↔ wallet through the fiat provider, USDC ↔ c0 on-chain, and the sweeps
of virtual wallets into c0 (the `sweep` job), in one feed."""

from .models import (
    BatchItem,
    CreateTransfer,
    CreateTransferBatch,
    DepositInstructions,
    Transfer,
    TransferBatch,
    TransferSide,
)
from .operations import Transfers

__all__ = [
    "BatchItem",
    "CreateTransfer",
    "CreateTransferBatch",
    "DepositInstructions",
    "Transfer",
    "TransferBatch",
    "TransferSide",
    "Transfers",
]
