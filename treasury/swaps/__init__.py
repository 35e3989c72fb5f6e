"""Deposit into and withdraw from `c0`: the approval and swap steps the caller signs."""

from .models import Prepared, PrepareSummary, PrepareSwap, Step, StepTransaction
from .operations import Swaps

__all__ = ["PrepareSummary", "PrepareSwap", "Prepared", "Step", "StepTransaction", "Swaps"]
