"""The contract functions the library calls, and Multicall3 batching."""

from __future__ import annotations

from collections.abc import Sequence

from .._evm import Function

BALANCE_OF = Function("balanceOf(address)", ("uint256",))
ALLOWANCE = Function("allowance(address,address)", ("uint256",))
APPROVE = Function("approve(address,uint256)", ("bool",))
NAME = Function("name()", ("string",))
SYMBOL = Function("symbol()", ("string",))
DECIMALS = Function("decimals()", ("uint8",))
SWAP = Function("swap(address,address,uint256,address)")
EARNER_RATE = Function("earnerRate()", ("uint32",))
AGGREGATE3 = Function("aggregate3((address,bool,bytes)[])", ("(bool,bytes)[]",))


def multicall_payload(calls: Sequence[tuple[str, bytes]]) -> bytes:
    """`aggregate3` calldata for (target, calldata) pairs, each allowed to fail."""
    return AGGREGATE3.encode([(target, True, data) for target, data in calls])


def multicall_results(data: bytes) -> list[tuple[bool, bytes]]:
    (results,) = AGGREGATE3.decode(data)
    return [(bool(ok), bytes(payload)) for ok, payload in results]
