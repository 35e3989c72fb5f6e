from __future__ import annotations

from .common import Address, Body, Label, Timestamped


class CreateRecipient(Body):
    address: Address
    label: Label


class Recipient(Timestamped):
    id: int
    address: Address
    label: str
