"""Wallets as the API takes and shows them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from .._infra.models import (
    Address,
    Body,
    Label,
    NonZeroAddress,
    Resource,
    Timestamped,
)

WalletType = Literal["managed", "tracked"]


class CreateWallet(Body):
    label: Label | None = None


class UpdateWallet(Body):
    label: Label


class TrackWallet(Body):
    address: NonZeroAddress
    label: Label


class Wallet(Timestamped):
    """An organization wallet; its address identifies it across the API.

    Beyond the specification's fields: `id`, the organization's number for the wallet
    (the `walletId` of `POST /v1/{chainId}/transactions`), and `type`, "managed" (custody
    signs for it) or "tracked" (watch-only).
    """

    id: int
    address: Address
    label: str | None
    type: WalletType


class TrackedWallet(Resource):
    id: int
    address: Address
    label: str
    type: WalletType
    created_at: datetime


class TrackedWalletResponse(Resource):
    wallet: TrackedWallet
