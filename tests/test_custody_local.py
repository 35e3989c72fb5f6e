"""Local custody runs the custody conformance suite, plus what only local keys promise:
private keys are encrypted in the treasury's storage and join its transactions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eth_account import Account

from treasury._infra.crypto import CUSTODY_KEYS
from treasury.backends.custody.base import CustodyContext
from treasury.backends.custody.local import LocalCustody
from treasury.errors import NotFound, TreasuryError
from treasury.testing.custody import CustodySuite, eip1559, new_address, signer_of

from .conftest import open_storage, sqlite_only


class Boom(Exception):
    """Aborts a transaction."""


class TestLocalCustody(CustodySuite):
    @pytest.fixture
    def context(self, storage_url: str) -> Iterator[CustodyContext]:
        """The suite's context, on this run's storage."""
        storage = open_storage(storage_url)
        yield self.make_context(storage)
        storage.close()

    @pytest.fixture
    def custody(self, context: CustodyContext) -> Iterator[LocalCustody]:
        custody = LocalCustody.from_url("local://")
        custody.bind(context)
        yield custody

    @sqlite_only  # reads the file
    def test_private_key_is_not_in_the_database_file(
        self, custody: LocalCustody, context: CustodyContext, db_path: Path
    ) -> None:
        key = custody.create_key()
        with context.storage.read() as tx:
            row = tx.one("SELECT private_key FROM custody_keys WHERE ref = ?", (key.ref,))
        assert row is not None
        sealed = bytes(row["private_key"])  # a 12-byte nonce, then AES-GCM for the purpose
        private_key = (
            AESGCM(context.encryption_key)
            .decrypt(sealed[:12], sealed[12:], CUSTODY_KEYS.encode())
            .decode()
        )
        assert Account.from_key(private_key).address.lower() == key.address  # the real key

        data = b"".join(
            path.read_bytes()
            for suffix in ("", "-wal")
            if (path := Path(f"{db_path}{suffix}")).exists()
        )
        assert key.address.encode() in data  # the file is readable: the address is there
        bare = private_key.removeprefix("0x")
        for form in (bare.encode(), bare.upper().encode(), bytes.fromhex(bare)):
            assert form not in data

    def test_key_created_in_a_rolled_back_transaction_is_gone(
        self, custody: LocalCustody, context: CustodyContext
    ) -> None:
        with pytest.raises(Boom), context.storage.transaction():
            lost = custody.create_key()
            assert signer_of(custody.sign_transaction(lost.ref, eip1559(new_address()))) == (
                lost.address
            )  # usable inside its transaction
            raise Boom
        with pytest.raises(NotFound):
            custody.sign_transaction(lost.ref, eip1559(new_address()))
        kept = custody.create_key()  # the custody still works afterwards
        assert signer_of(custody.sign_transaction(kept.ref, eip1559(new_address()))) == kept.address

    def test_unbound_custody_refuses_to_work(self) -> None:
        with pytest.raises(TreasuryError, match="not bound"):
            LocalCustody().create_key()
