"""Many view calls in one ``eth_call``, through a Multicall3 ``aggregate3``.

The ``aggregate3`` call data and its answer are encoded and decoded here by hand, not by
eth-abi: about 2 µs a balanceOf sub-call where eth-abi's general codec took about 50 µs
(100 token balances cost 6.6 ms of Python against 1.8 ms of node work). Both sides are
property-tested against eth-abi (tests/test_multicall_codec.py). The decoder accepts
the canonical encoding only (the one Solidity's ``abi.encode`` writes: every offset where
the previous part ends, zero padding, no trailing bytes) and refuses anything else, so a
malformed answer is an `UpstreamError`, never a wrong balance.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..backends.chain.base import Chain
from ..errors import UpstreamError
from .abi import AGGREGATE3, Function, address_word

_WORD = 32
_ZERO = bytes(_WORD)
_TRUE = (1).to_bytes(_WORD, "big")
_ARRAY_AT = (0x20).to_bytes(_WORD, "big")  # the answer's one head word: its array follows
_BYTES_AT = (0x40).to_bytes(_WORD, "big")  # in (bool, bytes): the bytes follow the head
_CALL_BYTES_AT = (0x60).to_bytes(_WORD, "big")  # in (address, bool, bytes): likewise
_UINT256 = ("uint256",)


class MalformedAnswer(ValueError):
    """Return data that is not the canonical encoding of ``(bool, bytes)[]``."""


def multicall_payload(calls: Sequence[tuple[str, bytes]]) -> bytes:
    """``aggregate3((address target, bool allowFailure, bytes callData)[])`` call data for
    (target, calldata) pairs, each allowed to fail; byte for byte what eth-abi encodes.
    `ValueError` for a target that is not an address."""
    heads: list[bytes] = []
    tails: list[bytes] = []
    offset = _WORD * len(calls)  # the first tuple starts after the offsets
    for target, data in calls:
        heads.append(offset.to_bytes(_WORD, "big"))
        padding = -len(data) % _WORD
        tails += (
            address_word(target),
            _TRUE,
            _CALL_BYTES_AT,
            len(data).to_bytes(_WORD, "big"),
            data,
            _ZERO[:padding],
        )
        offset += 4 * _WORD + len(data) + padding
    count = len(calls).to_bytes(_WORD, "big")
    return b"".join((AGGREGATE3.selector, _ARRAY_AT, count, *heads, *tails))


def multicall_results(data: bytes) -> list[tuple[bool, bytes]]:
    """``aggregate3``'s answer, ``(bool success, bytes returnData)[]``, as (success,
    returnData) pairs. `MalformedAnswer` unless `data` is exactly the canonical encoding:
    the array at 0x20, each element's offset where the previous one ends, each flag 0 or 1,
    each returnData at 0x40 within its element, within `data` and zero-padded, nothing
    after the last one."""
    end = len(data)
    if end < 2 * _WORD or end % _WORD or data[:_WORD] != _ARRAY_AT:
        raise MalformedAnswer("not an aggregate3 answer: no array at 0x20")
    count = int.from_bytes(data[_WORD : 2 * _WORD], "big")
    base = 2 * _WORD  # offsets count from the first word after the length
    if count > (end - base) // (4 * _WORD):  # an element takes at least four words
        raise MalformedAnswer(f"an array of {count} results does not fit in {end} bytes")
    results: list[tuple[bool, bytes]] = []
    position = count * _WORD  # where the next element must start, from `base`
    for index in range(count):
        head = base + index * _WORD
        if int.from_bytes(data[head : head + _WORD], "big") != position:
            raise MalformedAnswer(f"result {index} is not where the previous one ends")
        at = base + position
        if at + 3 * _WORD > end:
            raise MalformedAnswer(f"result {index} runs past the answer")
        flag = data[at : at + _WORD]
        if flag != _TRUE and flag != _ZERO:
            raise MalformedAnswer(f"result {index}: success is neither 0 nor 1")
        if data[at + _WORD : at + 2 * _WORD] != _BYTES_AT:
            raise MalformedAnswer(f"result {index}: returnData is not at 0x40")
        length = int.from_bytes(data[at + 2 * _WORD : at + 3 * _WORD], "big")
        start = at + 3 * _WORD
        if length > end - start:
            raise MalformedAnswer(f"result {index}: returnData runs past the answer")
        stop = start + length
        padded = start + length + (-length % _WORD)
        if padded > end or data[stop:padded] != _ZERO[: padded - stop]:
            raise MalformedAnswer(f"result {index}: returnData is not zero-padded")
        results.append((flag == _TRUE, data[start:stop]))
        position = padded - base
    if base + position != end:
        raise MalformedAnswer("bytes after the last result")
    return results


def uint256(data: bytes) -> int | None:
    """A ``uint256`` answer as eth-abi decodes it (its first word; trailing bytes are
    ignored), or None when `data` is shorter than a word."""
    return int.from_bytes(data[:_WORD], "big") if len(data) >= _WORD else None


def call_aggregate3(chain: Chain, payload: bytes, count: int) -> list[bytes | None]:
    """Send `payload` (from `multicall_payload`, carrying `count` calls) to the chain's
    Multicall3: each call's return data, None where it failed. `UpstreamError` when the
    answer is not `count` well-formed results."""
    at = chain.addresses["multicall"]
    try:
        results = multicall_results(chain.call(at, payload))
    except MalformedAnswer:  # no contract there (an empty answer) or not Multicall3
        results = None
    if results is None or len(results) != count:
        raise UpstreamError(f"the multicall contract at {at} gave no valid answer")
    return [data if ok else None for ok, data in results]


def multicall(
    chain: Chain, calls: Sequence[tuple[str, Function, tuple[object, ...]]]
) -> list[tuple[object, ...] | None]:
    """Run many view calls in one ``eth_call`` through Multicall3; None where one failed."""
    payload = multicall_payload([(target, fn.encode(*args)) for target, fn, args in calls])
    answers = call_aggregate3(chain, payload, len(calls))
    return [decode_result(fn, data) for data, (_, fn, _) in zip(answers, calls, strict=True)]


def decode_result(fn: Function, data: bytes | None) -> tuple[object, ...] | None:
    """`fn`'s outputs from a call's return data; None where the call failed (`data` None)
    or a non-standard contract answered garbage. A lone ``uint256`` is read directly."""
    if data is None:
        return None
    if fn.outputs == _UINT256:
        value = uint256(data)
        return None if value is None else (value,)
    try:
        return fn.decode(data)
    except Exception:
        return None


#: Sub-calls of one ``aggregate3`` sent by `multicall_at`.
PER_AGGREGATE = 100


def multicall_at(
    chain: Chain, calls: Sequence[tuple[str, Function, tuple[object, ...]]], block: int
) -> list[tuple[object, ...] | None]:
    """Many view calls at one block: ``aggregate3``s of `PER_AGGREGATE` sub-calls each,
    all sent at once (`Chain.calls_at`: a JSON-RPC batch on a node). None where one
    failed. ⌈len(calls) ÷ 100⌉ ``eth_call``s, whatever else the store holds."""
    at = chain.addresses["multicall"]
    chunks = [calls[i : i + PER_AGGREGATE] for i in range(0, len(calls), PER_AGGREGATE)]
    payloads = [
        (at, multicall_payload([(target, fn.encode(*args)) for target, fn, args in chunk]))
        for chunk in chunks
    ]
    answers = chain.calls_at(payloads, block) if payloads else []
    found: list[tuple[object, ...] | None] = []
    for chunk, data in zip(chunks, answers, strict=True):
        try:
            results = multicall_results(data)
        except MalformedAnswer:
            results = None
        if results is None or len(results) != len(chunk):
            raise UpstreamError(f"the multicall contract at {at} gave no valid answer")
        found += [
            decode_result(fn, data if ok else None)
            for (ok, data), (_, fn, _) in zip(results, chunk, strict=True)
        ]
    return found
