"""Transfers: bank ↔ wallet through the fiat provider, USDC ↔ c0 on-chain, and the sweeps
of virtual wallets into c0 (the `sweep` job), in one feed."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import (
    BatchItem,
    CreateTransfer,
    CreateTransferBatch,
    DepositInstructions,
    Transfer,
    TransferBatch,
    TransferSide,
)

if _typing.TYPE_CHECKING:
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

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"Transfers": ".operations"})
