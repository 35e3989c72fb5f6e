"""View calls for operations: one through Multicall3 for many, or a single one."""

from __future__ import annotations

from collections.abc import Sequence

from .._evm import Function
from ..backends.chain.base import Chain, Reverted
from ..errors import UpstreamError
from ._abi import multicall_payload, multicall_results


def multicall(
    chain: Chain, calls: Sequence[tuple[str, Function, tuple[object, ...]]]
) -> list[tuple[object, ...] | None]:
    """Run many view calls in one ``eth_call`` through Multicall3; None where one failed."""
    payload = multicall_payload([(target, fn.encode(*args)) for target, fn, args in calls])
    raw = chain.call(chain.addresses["multicall"], payload)
    decoded: list[tuple[object, ...] | None] = []
    for (ok, data), (_, fn, _) in zip(multicall_results(raw), calls, strict=True):
        try:
            decoded.append(fn.decode(data) if ok else None)
        except Exception:  # a non-standard token answering garbage
            decoded.append(None)
    return decoded


def read(chain: Chain, target: str, fn: Function, *args: object) -> tuple[object, ...]:
    """One view call; a revert here means a misconfigured chain, so 502."""
    try:
        return fn.decode(chain.call(target, fn.encode(*args)))
    except Reverted as error:
        raise UpstreamError(f"call to {target} reverted: {error.message}") from error
