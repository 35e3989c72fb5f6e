from .base import (
    ADDRESS_KEYS,
    OPTIONAL_ADDRESS_KEYS,
    Block,
    Chain,
    ChainConfig,
    Log,
    Receipt,
    Reverted,
)

__all__ = [
    "ADDRESS_KEYS",
    "OPTIONAL_ADDRESS_KEYS",
    "Block",
    "Chain",
    "ChainConfig",
    "Log",
    "Receipt",
    "Reverted",
]
