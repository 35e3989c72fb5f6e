"""The custody interface: create signing keys and sign with them; never destroy them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Self

from ..._crypto import SecretBox
from ..storage.base import Storage


@dataclass(frozen=True)
class CustodyKey:
    ref: str  # the custody's own identifier of the key
    address: str  # lowercase 0x address


class Custody(ABC):
    @classmethod
    @abstractmethod
    def from_url(cls, url: str) -> Self: ...

    def bind(self, *, storage: Storage, secrets: SecretBox) -> None:  # noqa: B027
        """Called once by `Treasury.open` with the library's storage and secret box."""

    @abstractmethod
    def create_key(self) -> CustodyKey:
        """Create a new secp256k1 key. Inside a storage transaction, it joins it."""

    @abstractmethod
    def sign_transaction(self, ref: str, transaction: dict[str, Any]) -> bytes:
        """Sign an EIP-1559 or legacy transaction dict; return the raw signed bytes."""
