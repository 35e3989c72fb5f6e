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
        (raw,) = self.sign_transactions(ref, [transaction])
        return raw

    def sign_transactions(self, ref: str, transactions: list[dict[str, Any]]) -> list[bytes]:
        """The key read and opened once for all of `transactions`."""
        Account = load("eth_account").Account
        context = self._bound()
        with context.storage.read() as tx:
            row = tx.one("SELECT private_key FROM custody_keys WHERE ref = ?", (ref,))
        if row is None:
            raise NotFound("Custody key not found")
        key = decrypt(AESGCM(context.encryption_key), CUSTODY_KEYS, bytes(row["private_key"]))
        account = Account.from_key(key)
        private = load("eth_keys").keys.PrivateKey(bytes(account.key))
        return [
            _eip1559(private, t)
            if _plain_eip1559(t)
            else bytes(account.sign_transaction(t).raw_transaction)
            for t in transactions
        ]


#: The fields of the EIP-1559 transactions the service signs (no access list).
_EIP1559 = frozenset(
    {"chainId", "nonce", "to", "data", "value", "gas", "maxFeePerGas", "maxPriorityFeePerGas"}
)


def _plain_eip1559(transaction: dict[str, Any]) -> bool:
    """An EIP-1559 transaction of exactly the service's shape: integers, a 0x address,
    data as bytes (anything else is left to eth-account, which checks and converts)."""
    fields = set(transaction)
    if not _EIP1559 <= fields <= _EIP1559 | {"type"} or transaction.get("type", 2) != 2:
        return False
    numbers = (transaction[name] for name in _EIP1559 - {"to", "data"})
    to = transaction["to"]
    return (
        all(type(n) is int and n >= 0 for n in numbers)
        and isinstance(to, str)
        and len(to) == 42
        and to.startswith("0x")
        and isinstance(transaction["data"], bytes)
    )


def _eip1559(private: Any, transaction: dict[str, Any]) -> bytes:
    """An EIP-1559 transaction signed straight from its RLP (0x02 || rlp([chainId,
    nonce, maxPriorityFeePerGas, maxFeePerGas, gas, to, value, data, accessList, yParity,
    r, s])), as eth-account signs it, byte for byte (the signature is deterministic,
    RFC 6979), without its dict validation: a payout run signs thousands."""
    rlp, keccak = load("rlp"), load("eth_utils").keccak
    fields = [
        transaction["chainId"],
        transaction["nonce"],
        transaction["maxPriorityFeePerGas"],
        transaction["maxFeePerGas"],
        transaction["gas"],
        bytes.fromhex(str(transaction["to"]).removeprefix("0x")),
        transaction["value"],
        bytes(transaction["data"]),
        [],
    ]
    signature = private.sign_msg_hash(keccak(b"\x02" + rlp.encode(fields)))
    return b"\x02" + bytes(rlp.encode([*fields, signature.v, signature.r, signature.s]))
