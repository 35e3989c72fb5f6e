"""Wallets: managed (custody signs) and tracked (watch-only), numbered per organization."""

from .models import (
    CreateWallet,
    TrackedWallet,
    TrackedWalletResponse,
    TrackWallet,
    UpdateWallet,
    Wallet,
)
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
