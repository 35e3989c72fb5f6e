"""Deposit into and withdraw from `c0`: the approval and swap steps the caller signs."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import Prepared, PrepareSummary, PrepareSwap, Step, StepTransaction

if _typing.TYPE_CHECKING:
    from .operations import Swaps


__all__ = ["PrepareSummary", "PrepareSwap", "Prepared", "Step", "StepTransaction", "Swaps"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"Swaps": ".operations"})
