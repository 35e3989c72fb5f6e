"""Local custody: keys generated here, stored AES-GCM encrypted in the treasury's storage."""

from __future__ import annotations

from typing import Any, Self

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..._infra.clock import to_text
from ..._infra.crypto import CUSTODY_KEYS, decrypt, encrypt
from ..._infra.imports import load
from ...errors import NotFound, TreasuryError
from .base import Custody, CustodyContext, CustodyKey


class LocalCustody(Custody):
    """``local://`` — keys live in the treasury's own storage, encrypted at rest."""

    def __init__(self) -> None:
        self._context: CustodyContext | None = None

    @classmethod
    def from_url(cls, url: str) -> Self:
        return cls()

    def bind(self, context: CustodyContext) -> None:
        self._context = context

    def _bound(self) -> CustodyContext:
        if self._context is None:
            raise TreasuryError("local custody is not bound to a treasury")
        return self._context

    def create_key(self) -> CustodyKey:
        Account = load("eth_account").Account  # heavy: imported on first use
        context = self._bound()
        account = Account.create()
        address = account.address.lower()
        sealed = encrypt(AESGCM(context.encryption_key), CUSTODY_KEYS, account.key.hex())
        with context.storage.transaction() as tx:
            tx.execute(
                "INSERT INTO custody_keys (ref, address, private_key, created_at) VALUES (?, ?, ?, ?)",
                (address, address, sealed, to_text(context.now())),
            )
        return CustodyKey(ref=address, address=address)

    def sign_transaction(self, ref: str, transaction: dict[str, Any]) -> bytes:
        Account = load("eth_account").Account
        context = self._bound()
        with context.storage.read() as tx:
            row = tx.one("SELECT private_key FROM custody_keys WHERE ref = ?", (ref,))
        if row is None:
            raise NotFound("Custody key not found")
        key = decrypt(AESGCM(context.encryption_key), CUSTODY_KEYS, bytes(row["private_key"]))
        return bytes(Account.sign_transaction(transaction, key).raw_transaction)
