"""The handful of contract functions the library calls, encoded with eth-abi (imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class Function:
    signature: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    @cached_property
    def selector(self) -> bytes:
        from eth_utils.crypto import keccak

        return bytes(keccak(text=self.signature)[:4])

    def encode(self, *args: Any) -> bytes:
        from eth_abi.abi import encode

        return self.selector + encode(list(self.inputs), list(args))

    def decode(self, data: bytes) -> tuple[Any, ...]:
        from eth_abi.abi import decode

        return tuple(decode(list(self.outputs), data))


BALANCE_OF = Function("balanceOf(address)", ("address",), ("uint256",))
ALLOWANCE = Function("allowance(address,address)", ("address", "address"), ("uint256",))
APPROVE = Function("approve(address,uint256)", ("address", "uint256"), ("bool",))
NAME = Function("name()", (), ("string",))
SYMBOL = Function("symbol()", (), ("string",))
DECIMALS = Function("decimals()", (), ("uint8",))
SWAP = Function(
    "swap(address,address,uint256,address)", ("address", "address", "uint256", "address")
)
EARNER_RATE = Function("earnerRate()", (), ("uint32",))
AGGREGATE3 = Function(
    "aggregate3((address,bool,bytes)[])", ("(address,bool,bytes)[]",), ("(bool,bytes)[]",)
)


def multicall_payload(calls: Sequence[tuple[str, bytes]]) -> bytes:
    """`aggregate3` calldata for (target, calldata) pairs, each allowed to fail."""
    return AGGREGATE3.encode([(target, True, data) for target, data in calls])


def multicall_results(data: bytes) -> list[tuple[bool, bytes]]:
    (results,) = AGGREGATE3.decode(data)
    return [(bool(ok), bytes(payload)) for ok, payload in results]
