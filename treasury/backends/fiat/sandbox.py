"""``sandbox://`` — an in-process simulation of a fiat provider."""

from __future__ import annotations

from typing import Self

from ...models.bank_accounts import CreateBankAccount
from .base import FiatProvider


class SandboxFiat(FiatProvider):
    def __init__(self) -> None:
        self.accounts: dict[str, CreateBankAccount] = {}

    @classmethod
    def from_url(cls, url: str) -> Self:
        return cls()

    def register_bank_account(self, external_id: str, account: CreateBankAccount) -> None:
        self.accounts[external_id] = account
