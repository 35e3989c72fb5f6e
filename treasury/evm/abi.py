"""ABI encoding and the contract functions the library calls.

Shared by the domains, the chain backends and the test suites. eth-abi and eth-utils
are imported inside the functions: `import treasury` stays light.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

_HASH = re.compile(r"0x[0-9a-fA-F]{64}")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_ADDRESS_PADDING = bytes(12)  # an address is the low 20 bytes of its word


def selector(signature: str) -> bytes:
    """The 4-byte selector of e.g. ``"balanceOf(address)"``."""
    from eth_utils.crypto import keccak

    return bytes(keccak(text=signature)[:4])


def argument_types(signature: str) -> list[str]:
    """``"swap(address,address,uint256,address)"`` -> its argument types (tuples too)."""
    from eth_abi.grammar import parse

    return [t.to_type_str() for t in parse(signature[signature.index("(") :]).components]


def address_word(address: str) -> bytes:
    """`address` as one 32-byte ABI word, as eth-abi encodes it. `ValueError` unless it is
    0x and 40 hex digits (mixed case only with a valid EIP-55 checksum)."""
    if not is_address(address):
        raise ValueError(f"not an address: {address!r}")
    digits = address[2:]
    if digits != digits.lower() and digits != digits.upper():
        from eth_utils.address import is_checksum_address

        if not is_checksum_address(address):
            raise ValueError(f"not an address (bad EIP-55 checksum): {address!r}")
    return _ADDRESS_PADDING + bytes.fromhex(digits)


def calldata(signature: str, *args: Any) -> bytes:
    """Selector and ABI-encoded arguments: ``calldata("mint(address,uint256)", to, 5)``."""
    from eth_abi.abi import encode

    return selector(signature) + (encode(argument_types(signature), list(args)) if args else b"")


@dataclass(frozen=True)
class Function:
    """A contract function the library calls: encode its calls, decode its results."""

    signature: str
    outputs: tuple[str, ...] = ()

    @cached_property
    def selector(self) -> bytes:
        return selector(self.signature)

    @cached_property
    def argument_types(self) -> list[str]:
        return argument_types(self.signature)

    @cached_property
    def _addresses_only(self) -> bool:
        """Whether it takes only addresses (read from its signature's text: parsing an
        empty argument list is an error of eth-abi's)."""
        inside = self.signature[self.signature.index("(") + 1 : -1]
        return bool(inside) and all(t == "address" for t in inside.split(","))

    def encode(self, *args: Any) -> bytes:
        if args and self._addresses_only and len(args) == len(self.argument_types):
            # balanceOf(address) and its kind, byte for byte as eth-abi encodes them: a
            # word per address (reconciliation encodes 10,000 of them a run)
            return self.selector + b"".join(address_word(str(a)) for a in args)
        from eth_abi.abi import encode

        return self.selector + (encode(self.argument_types, list(args)) if args else b"")

    def decode(self, data: bytes) -> tuple[Any, ...]:
        from eth_abi.abi import decode

        return tuple(decode(list(self.outputs), data))


BALANCE_OF = Function("balanceOf(address)", ("uint256",))
ALLOWANCE = Function("allowance(address,address)", ("uint256",))
APPROVE = Function("approve(address,uint256)", ("bool",))
NAME = Function("name()", ("string",))
SYMBOL = Function("symbol()", ("string",))
DECIMALS = Function("decimals()", ("uint8",))
SWAP = Function("swap(address,address,uint256,address)")
#: M0's SwapFacility: the exit from an extension (c0) into an asset it holds.
REPLACE_ASSET_WITH_M = Function("replaceAssetWithM(address,address,address,uint256,address)")
IS_APPROVED_EXTENSION = Function("isApprovedExtension(address)", ("bool",))
#: M0's JMI extension (c0): its supply, the assets behind it, and one asset's part.
TOTAL_SUPPLY = Function("totalSupply()", ("uint256",))
TOTAL_ASSETS = Function("totalAssets()", ("uint256",))
ASSET_BALANCE_OF = Function("assetBalanceOf(address)", ("uint256",))
EARNER_RATE = Function("earnerRate()", ("uint32",))
IS_CLAIMED = Function("isClaimed(uint256,uint256)", ("bool",))
ROOTS = Function("roots(uint256)", ("bytes32",))
POST_ROOT = Function("postRoot(uint256,bytes32)")
OPERATOR = Function("operator()", ("address",))
MINT = Function("mint(address,uint256)")
TRANSFER = Function("transfer(address,uint256)", ("bool",))
GET_ETH_BALANCE = Function("getEthBalance(address)", ("uint256",))
AGGREGATE3 = Function("aggregate3((address,bool,bytes)[])", ("(bool,bytes)[]",))


TRANSACTION_FIELDS = (
    "from",
    "to",
    "data",
    "input",
    "value",
    "gas",
    "nonce",
    "gasPrice",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
)


def call_fields(transaction: Mapping[str, Any]) -> dict[str, Any]:
    """A call or transaction dict (camelCase; ints, hex or bytes) in one form: addresses
    lowercase, `input` as `data` in 0x hex, quantities as ints; unknown fields refused."""
    fields: dict[str, Any] = {}
    for key, value in transaction.items():
        if key not in TRANSACTION_FIELDS:
            raise ValueError(f"unsupported transaction field {key!r}")
        if value is None:
            continue
        if key in ("from", "to"):
            fields[key] = str(value).lower()
        elif key in ("data", "input"):
            fields["data"] = "0x" + bytes(value).hex() if isinstance(value, bytes) else str(value)
        else:
            fields[key] = int(value, 16) if isinstance(value, str) else int(value)
    return fields


def revert_reason(error: Any) -> str | None:
    """The reason of a revert from its return data (bytes or hex) or an error message."""
    while isinstance(error, Exception) and error.args:  # eth-tester wraps py-evm's Revert
        error = error.args[0]
    if isinstance(error, str) and re.fullmatch(r"0x([0-9a-fA-F]{2})*", error):
        error = bytes.fromhex(error[2:])
    if isinstance(error, bytes):
        return _reason_of_data(error)
    if isinstance(error, str):
        return re.sub(r"^execution reverted:?", "", error).strip() or None
    return None


def _reason_of_data(data: bytes) -> str | None:
    from eth_abi.abi import decode
    from eth_abi.exceptions import DecodingError

    if not data:
        return None
    if data[:4] == selector("Error(string)"):
        with contextlib.suppress(DecodingError):
            return str(decode(["string"], data[4:])[0])
    if data[:4] == selector("Panic(uint256)") and len(data) == 36:
        return f"panic 0x{int.from_bytes(data[4:], 'big'):02x}"
    return f"custom error 0x{data[:4].hex()}"


def check_hash(tx_hash: str) -> str:
    """`tx_hash` lowercased; `ValueError` unless it is 0x and 64 hex digits."""
    if not (isinstance(tx_hash, str) and _HASH.fullmatch(tx_hash)):
        raise ValueError(f"not a transaction hash: {tx_hash!r}")
    return tx_hash.lower()


def is_address(value: str) -> bool:
    """Whether `value` is 0x and 40 hex digits."""
    return isinstance(value, str) and _ADDRESS.fullmatch(value) is not None


def contract_address(sender: str, nonce: int) -> str:
    """Where ``CREATE`` from `sender` at `nonce` puts a contract (lowercase)."""
    import rlp
    from eth_utils.address import to_canonical_address
    from eth_utils.crypto import keccak

    return "0x" + keccak(rlp.encode([to_canonical_address(sender), nonce]))[12:].hex()
