"""Secrets at rest: the master key, AES-GCM encryption, and hashing of API keys."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import TreasuryError

log = logging.getLogger("treasury")

MASTER_KEY_ENV = "TREASURY_MASTER_KEY"
_NONCE_BYTES = 12
KEY_BYTES = 32  # the master key's length, and every key derived from it (AES-256)
CUSTODY_KEYS = "custody-private-key"  # the purpose custody keys are sealed for


def new_master_key() -> str:
    """A fresh 256-bit master key, base64url encoded."""
    return base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).decode()


def parse_master_key(value: str | bytes) -> bytes:
    """Accept `KEY_BYTES` raw bytes, or as many as base64url/base64 or hex text."""
    if isinstance(value, bytes) and len(value) == KEY_BYTES:
        return value
    text = value.decode() if isinstance(value, bytes) else value
    text = text.strip()
    padded = text + "=" * (-len(text) % 4)
    for decode, encoded in (
        (bytes.fromhex, text),
        (base64.urlsafe_b64decode, padded),
        (base64.b64decode, padded),
    ):
        try:
            raw = decode(encoded)
        except ValueError:
            continue
        if len(raw) == KEY_BYTES:
            return raw
    raise TreasuryError(f"master key must be {KEY_BYTES} bytes (base64 or hex encoded)")


def resolve_master_key(
    explicit: str | bytes | None,
    key_file: Path | None,
    *,
    durable: bool = True,
    has_data: Callable[[], bool] = lambda: False,
) -> bytes:
    """The master key: the argument, else TREASURY_MASTER_KEY, else a 0600 file beside
    the data. A store that keeps no key file (a database server) needs one of the first
    two; one that is not durable (an in-memory database) gets an ephemeral key, which
    dies with it. A store that already holds data (`has_data`) whose key file is missing
    is an error naming the file, never a new key: its encrypted data would not open."""
    if explicit is not None:
        return parse_master_key(explicit)
    if os.environ.get(MASTER_KEY_ENV):
        return parse_master_key(os.environ[MASTER_KEY_ENV])
    if key_file is None and not durable:
        return secrets.token_bytes(KEY_BYTES)
    if key_file is None:
        raise TreasuryError(
            f"this storage keeps no key file: set {MASTER_KEY_ENV} (or pass master_key=),"
            " and keep that key safe: it decrypts the data at rest"
        )
    if not key_file.exists():
        if has_data():
            raise TreasuryError(
                f"the master key file {key_file} is missing, and this store holds data"
                " encrypted with its key: restore the file (from your backup) or set"
                f" {MASTER_KEY_ENV}; a new key would leave that data unreadable"
            )
        _create_key_file(key_file)
    return parse_master_key(key_file.read_text())


def _create_key_file(key_file: Path) -> None:
    """Write a new key atomically: a complete 0600 file is linked into place, or nothing
    is (another process won the race, and its key is the one to use)."""
    temporary = key_file.with_name(f".{key_file.name}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new_master_key() + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.link(temporary, key_file)
        log.warning("generated a new master key in %s; back it up, it decrypts your data", key_file)
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)


def encrypt(cipher: AESGCM, purpose: str, plaintext: str) -> bytes:
    """The one sealing of the library: a fresh nonce, then `plaintext` under `cipher`
    with `purpose` as associated data (a blob sealed for one purpose opens for no other)."""
    nonce = secrets.token_bytes(_NONCE_BYTES)
    return nonce + cipher.encrypt(nonce, plaintext.encode(), purpose.encode())


def decrypt(cipher: AESGCM, purpose: str, blob: bytes) -> str:
    """The plaintext of an `encrypt`ed blob; a clear `WrongMasterKey` when the key is not
    the one that encrypted it (a rotated or mistyped key), never a bare crypto exception."""
    nonce, ciphertext = blob[:_NONCE_BYTES], blob[_NONCE_BYTES:]
    try:
        plain = cipher.decrypt(nonce, ciphertext, purpose.encode())
    except InvalidTag:
        raise WrongMasterKey(purpose) from None
    return plain.decode()


_SEALED = "sealed:"


class SecretBox:
    """AES-256-GCM under keys derived from the master key, one per purpose."""

    def __init__(self, master_key: bytes):
        self._master = master_key
        self._ciphers: dict[str, AESGCM] = {}  # one per purpose, made on first use

    def _aead(self, purpose: str) -> AESGCM:
        cipher = self._ciphers.get(purpose)
        if cipher is None:
            cipher = self._ciphers[purpose] = AESGCM(self.key_for(purpose))
        return cipher

    def key_for(self, purpose: str) -> bytes:
        """The 32-byte encryption key of one purpose (a custody plugin gets its own)."""
        return self.derive(f"encrypt:{purpose}")

    def derive(self, purpose: str) -> bytes:
        """A 32-byte subkey for one purpose (HMAC-SHA256 of the purpose)."""
        return hmac.new(self._master, purpose.encode(), hashlib.sha256).digest()

    def encrypt(self, purpose: str, plaintext: str) -> bytes:
        return encrypt(self._aead(purpose), purpose, plaintext)

    def decrypt(self, purpose: str, blob: bytes) -> str:
        return decrypt(self._aead(purpose), purpose, blob)

    def seal(self, purpose: str, plaintext: str) -> str:
        """`encrypt` as text for a TEXT column: ``sealed:`` and the base64 of the blob."""
        return _SEALED + base64.b64encode(self.encrypt(purpose, plaintext)).decode()

    def unseal(self, purpose: str, stored: str) -> str:
        """The plaintext of a `seal`ed text; a text stored before it was sealed as is."""
        if not stored.startswith(_SEALED):
            return stored
        return self.decrypt(purpose, base64.b64decode(stored[len(_SEALED) :]))


class WrongMasterKey(TreasuryError):
    """Data at rest does not decrypt with the configured master key."""

    def __init__(self, purpose: str) -> None:
        super().__init__(
            f"cannot decrypt a {purpose}: the master key is not the one that encrypted it"
        )


def hash_secret(secret: str) -> str:
    """SHA-256 of a high-entropy secret (API keys are 256-bit random, so no slow KDF)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def same_secret(secret: str, stored_hash: str) -> bool:
    """Compare a presented secret with a stored hash in constant time."""
    return hmac.compare_digest(hash_secret(secret), stored_hash)
