"""Recipients: the organization's address book."""

from __future__ import annotations

from typing import Self

from pydantic import model_validator

from .._infra.models import Address, Body, Label, Timestamped


class CreateRecipient(Body):
    address: Address
    label: Label


class UpdateRecipient(Body):
    """A new address, a new label, or both."""

    address: Address | None = None
    label: Label | None = None

    @model_validator(mode="after")
    def _something(self) -> Self:
        if self.address is None and self.label is None:
            raise ValueError("give an address, a label, or both")
        return self


class Recipient(Timestamped):
    id: int
    address: Address
    label: str
