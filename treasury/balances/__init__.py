"""Token balances of an address: one Multicall3 `eth_call` per 100 tokens."""

from .models import TokenBalance
from .operations import Balances

__all__ = ["Balances", "TokenBalance"]
