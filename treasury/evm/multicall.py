"""Many view calls in one ``eth_call``, through a Multicall3 ``aggregate3``."""

from __future__ import annotations

from collections.abc import Sequence

from ..backends.chain.base import Chain
from ..errors import UpstreamError
from .abi import AGGREGATE3, Function


def multicall_payload(calls: Sequence[tuple[str, bytes]]) -> bytes:
    """`aggregate3` calldata for (target, calldata) pairs, each allowed to fail."""
    return AGGREGATE3.encode([(target, True, data) for target, data in calls])


def multicall_results(data: bytes) -> list[tuple[bool, bytes]]:
    (results,) = AGGREGATE3.decode(data)
    return [(bool(ok), bytes(payload)) for ok, payload in results]


def multicall(
    chain: Chain, calls: Sequence[tuple[str, Function, tuple[object, ...]]]
) -> list[tuple[object, ...] | None]:
    """Run many view calls in one ``eth_call`` through Multicall3; None where one failed."""
    from eth_abi.exceptions import DecodingError

    payload = multicall_payload([(target, fn.encode(*args)) for target, fn, args in calls])
    at = chain.addresses["multicall"]
    try:
        results = multicall_results(chain.call(at, payload))
    except DecodingError:  # no contract there (an empty answer) or not Multicall3
        raise UpstreamError(f"the multicall contract at {at} gave no valid answer") from None
    decoded: list[tuple[object, ...] | None] = []
    for (ok, data), (_, fn, _) in zip(results, calls, strict=True):
        try:
            decoded.append(fn.decode(data) if ok else None)
        except Exception:  # a non-standard token answering garbage
            decoded.append(None)
    return decoded
