"""Wallets: managed (custody signs) and tracked (watch-only), numbered per organization."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import (
    CreateWallet,
    TrackedWallet,
    TrackedWalletResponse,
    TrackWallet,
    UpdateWallet,
    Wallet,
)

if _typing.TYPE_CHECKING:
    from .operations import Wallets


__all__ = [
    "CreateWallet",
    "TrackWallet",
    "TrackedWallet",
    "TrackedWalletResponse",
    "UpdateWallet",
    "Wallet",
    "Wallets",
]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"Wallets": ".operations"})
