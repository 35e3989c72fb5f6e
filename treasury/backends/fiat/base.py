"""The fiat provider interface: the bank side of on- and off-ramps."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self

from ...models.bank_accounts import CreateBankAccount


class FiatProvider(ABC):
    @classmethod
    @abstractmethod
    def from_url(cls, url: str) -> Self: ...

    @abstractmethod
    def register_bank_account(self, external_id: str, account: CreateBankAccount) -> None:
        """Register an external bank account under our id; raise `UpstreamError` on failure."""
