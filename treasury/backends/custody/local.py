"""Local custody: keys generated here, stored AES-GCM encrypted under the master key."""

from __future__ import annotations

from typing import Any, Self

from ..._clock import system_clock, to_text
from ..._crypto import SecretBox
from ...errors import NotFound, TreasuryError
from ..storage.base import Storage
from .base import Custody, CustodyKey

_PURPOSE = "custody-private-key"


class LocalCustody(Custody):
    """``local://`` — keys live in the treasury's own storage, encrypted at rest."""

    def __init__(self) -> None:
        self._storage: Storage | None = None
        self._secrets: SecretBox | None = None

    @classmethod
    def from_url(cls, url: str) -> Self:
        return cls()

    def bind(self, *, storage: Storage, secrets: SecretBox) -> None:
        self._storage, self._secrets = storage, secrets

    def _bound(self) -> tuple[Storage, SecretBox]:
        if self._storage is None or self._secrets is None:
            raise TreasuryError("local custody is not bound to a storage")
        return self._storage, self._secrets

    def create_key(self) -> CustodyKey:
        from eth_account import Account  # heavy import, deferred to first use

        storage, secrets = self._bound()
        account = Account.create()
        address = account.address.lower()
        sealed = secrets.encrypt(_PURPOSE, account.key.hex())
        with storage.transaction() as tx:
            tx.execute(
                "INSERT INTO custody_keys (ref, address, private_key, created_at) VALUES (?, ?, ?, ?)",
                (address, address, sealed, to_text(system_clock())),
            )
        return CustodyKey(ref=address, address=address)

    def sign_transaction(self, ref: str, transaction: dict[str, Any]) -> bytes:
        from eth_account import Account

        storage, secrets = self._bound()
        with storage.read() as tx:
            row = tx.one("SELECT private_key FROM custody_keys WHERE ref = ?", (ref,))
        if row is None:
            raise NotFound("Custody key not found")
        key = secrets.decrypt(_PURPOSE, row["private_key"])
        return bytes(Account.sign_transaction(transaction, key).raw_transaction)
