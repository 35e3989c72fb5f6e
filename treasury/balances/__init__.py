"""Token balances of an address: one Multicall3 `eth_call` per 100 tokens."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import TokenBalance

if _typing.TYPE_CHECKING:
    from .operations import Balances


__all__ = ["Balances", "TokenBalance"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"Balances": ".operations"})
