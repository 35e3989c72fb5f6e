"""The custody interface: create signing keys and sign with them; never destroy them.

A custody plugin speaks plain types: a `CustodyKey` out, a transaction dict in, raw
signed bytes out. When the treasury opens it hands the plugin a `CustodyContext`;
`treasury.testing.custody.CustodySuite` is the conformance suite.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

from ..storage.base import Storage


@dataclass(frozen=True)
class CustodyKey:
    ref: str  # the custody's own identifier of the key
    address: str  # lowercase 0x address


@dataclass(frozen=True)
class CustodyContext:
    """What the treasury gives a custody plugin when it opens."""

    storage: Storage  # the treasury's own storage (local custody keeps its keys there)
    encryption_key: bytes  # 32 bytes for this plugin alone, derived from the master key
    now: Callable[[], datetime]  # the treasury's clock


class Custody(ABC):
    @classmethod
    @abstractmethod
    def from_url(cls, url: str) -> Self: ...

    def bind(self, context: CustodyContext) -> None:  # noqa: B027 (optional hook)
        """Called once by `Treasury.open`, before any other method."""

    @abstractmethod
    def create_key(self) -> CustodyKey:
        """Create a new secp256k1 key. Inside a storage transaction, it joins it."""

    @abstractmethod
    def sign_transaction(self, ref: str, transaction: dict[str, Any]) -> bytes:
        """Sign an EIP-1559 or legacy transaction dict; return the raw signed bytes.
        `NotFound` for a ref this custody never created."""

    def sign_transactions(self, ref: str, transactions: list[dict[str, Any]]) -> list[bytes]:
        """Sign several transactions with one key (a payout run's legs), in order.
        Optional: by default one `sign_transaction` after another; a custody that can
        open the key once for all of them does."""
        return [self.sign_transaction(ref, transaction) for transaction in transactions]
