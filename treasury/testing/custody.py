"""The custody conformance suite: what every `Custody` plugin must get right.

Subclass `CustodySuite` in a test module and provide a ``custody`` fixture that yields a
custody already bound, as `Treasury.open` binds it. The suite's ``context`` fixture is a
`CustodyContext` on a fresh, migrated SQLite file (`CustodySuite.make_context` builds
one on any `Storage`); a custody that keeps its keys elsewhere may ignore its storage::

    import pytest
    from treasury.testing.custody import CustodySuite

    class TestMyCustody(CustodySuite):
        @pytest.fixture
        def custody(self, context):
            custody = MyCustody.from_url(...)
            custody.bind(context)
            yield custody

Transactions are signed for chain 31337 and never broadcast: the suite recovers the
signer from the raw bytes and decodes what was signed.
"""

from __future__ import annotations

import re
import secrets
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rlp
from eth_account import Account
from eth_account.typed_transactions.typed_transaction import TypedTransaction
from eth_utils.address import to_checksum_address
from hexbytes import HexBytes

from treasury._infra.clock import system_clock, to_text
from treasury._infra.schema import migrate
from treasury.backends.custody.base import Custody, CustodyContext, CustodyKey
from treasury.backends.storage.base import Storage
from treasury.backends.storage.sqlite import SQLiteStorage
from treasury.errors import NotFound
from treasury.testing._support import run_threads

ADDRESS = re.compile(r"0x[0-9a-f]{40}")
CHAIN_ID = 31337
GWEI = 10**9


def eip1559(to: str, *, nonce: int = 0, value: int = 1) -> dict[str, Any]:
    """An EIP-1559 transfer as the treasury's signer builds it (no ``type`` key)."""
    return {
        "chainId": CHAIN_ID,
        "nonce": nonce,
        "to": to_checksum_address(to),
        "value": value,
        "gas": 21000,
        "maxFeePerGas": 2 * GWEI,
        "maxPriorityFeePerGas": GWEI,
        "data": b"",
    }


def legacy(to: str, *, nonce: int = 0, value: int = 1) -> dict[str, Any]:
    """A legacy (EIP-155) transfer, as chains without EIP-1559 fees get it."""
    return {
        "chainId": CHAIN_ID,
        "nonce": nonce,
        "to": to_checksum_address(to),
        "value": value,
        "gas": 21000,
        "gasPrice": GWEI,
        "data": b"",
    }


def signer_of(raw: bytes) -> str:
    """The lowercase address that signed `raw`."""
    return str(Account.recover_transaction(raw)).lower()


def new_address() -> str:
    return str(Account.create().address).lower()


class CustodySuite:
    """Conformance tests for a `Custody`; subclasses provide the ``custody`` fixture."""

    # -- fixtures ---------------------------------------------------------------------

    @staticmethod
    def make_context(storage: Storage) -> CustodyContext:
        """A context on `storage` (migrated here) with a random 32-byte key."""
        migrate(storage, now=to_text(system_clock()))
        return CustodyContext(storage, secrets.token_bytes(32), system_clock)

    @pytest.fixture
    def context(self, tmp_path: Path) -> Iterator[CustodyContext]:
        """A context on a fresh SQLite file, ``custody.db`` in `tmp_path`."""
        storage = SQLiteStorage(tmp_path / "custody.db")
        yield self.make_context(storage)
        storage.close()

    # -- keys -------------------------------------------------------------------------

    def test_create_key(self, custody: Custody) -> None:
        key = custody.create_key()
        assert isinstance(key, CustodyKey)
        assert ADDRESS.fullmatch(key.address), key.address
        assert isinstance(key.ref, str) and key.ref.strip()

    def test_keys_are_distinct(self, custody: Custody) -> None:
        keys = [custody.create_key() for _ in range(5)]
        assert len({key.address for key in keys}) == 5
        assert len({key.ref for key in keys}) == 5

    def test_concurrent_creation(self, custody: Custody) -> None:
        keys: list[CustodyKey] = []
        lock = threading.Lock()

        def create() -> None:
            key = custody.create_key()
            with lock:
                keys.append(key)

        run_threads([create] * 8)
        assert len(keys) == 8
        assert len({key.address for key in keys}) == 8
        assert len({key.ref for key in keys}) == 8
        for key in keys:  # each one is usable afterwards
            raw = custody.sign_transaction(key.ref, eip1559(new_address()))
            assert signer_of(raw) == key.address

    # -- signing ----------------------------------------------------------------------

    def test_sign_eip1559(self, custody: Custody) -> None:
        key, to = custody.create_key(), new_address()
        raw = custody.sign_transaction(key.ref, eip1559(to, nonce=0, value=1))
        assert isinstance(raw, bytes) and raw[0] == 2  # an EIP-2718 type-2 envelope
        assert signer_of(raw) == key.address
        signed = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
        assert signed["chainId"] == CHAIN_ID and signed["nonce"] == 0
        assert bytes(signed["to"]).hex() == to[2:] and signed["value"] == 1
        assert signed["gas"] == 21000 and bytes(signed["data"]) == b""
        assert (signed["maxFeePerGas"], signed["maxPriorityFeePerGas"]) == (2 * GWEI, GWEI)

    def test_sign_legacy(self, custody: Custody) -> None:
        key, to = custody.create_key(), new_address()
        raw = custody.sign_transaction(key.ref, legacy(to, nonce=7, value=5))
        assert isinstance(raw, bytes) and raw[0] >= 0xC0  # a bare RLP list
        assert signer_of(raw) == key.address
        nonce, gas_price, gas, to_, value, data, v, _, _ = rlp.decode(raw)
        as_int = [int.from_bytes(field, "big") for field in (nonce, gas_price, gas, value, v)]
        assert as_int[:4] == [7, GWEI, 21000, 5]
        assert to_.hex() == to[2:] and data == b""
        assert as_int[4] in (CHAIN_ID * 2 + 35, CHAIN_ID * 2 + 36)  # EIP-155 replay protection

    def test_each_key_signs_as_itself(self, custody: Custody) -> None:
        one, two = custody.create_key(), custody.create_key()
        to = new_address()
        assert signer_of(custody.sign_transaction(one.ref, eip1559(to))) == one.address
        assert signer_of(custody.sign_transaction(two.ref, eip1559(to))) == two.address
        assert signer_of(custody.sign_transaction(one.ref, legacy(to))) == one.address

    def test_unknown_ref_is_not_found(self, custody: Custody) -> None:
        custody.create_key()  # a custody with keys, just not this one
        for ref in (f"no-such-key-{uuid.uuid4().hex}", new_address()):
            with pytest.raises(NotFound):
                custody.sign_transaction(ref, eip1559(new_address()))
