from __future__ import annotations

from datetime import datetime
from typing import Literal

from .common import Address, Body, Label, NonZeroAddress, Resource, Timestamped


class CreateWallet(Body):
    label: Label | None = None


class TrackWallet(Body):
    address: NonZeroAddress
    label: Label


class Wallet(Timestamped):
    """An organization wallet; its address identifies it across the API.

    `id` is an addition to the specification's fields: it is the `walletId` that
    `POST /v1/{chainId}/transactions` takes.
    """

    id: int
    address: Address
    label: str | None


WalletType = Literal["managed", "tracked"]


class TrackedWallet(Resource):
    id: int
    address: Address
    label: str
    type: WalletType
    created_at: datetime


class TrackedWalletResponse(Resource):
    wallet: TrackedWallet
