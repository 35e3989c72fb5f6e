"""Sending from managed wallets: custody signs, and nonces are allocated per wallet.

One lock per (chain, wallet) in the process serialises nonce → sign → broadcast, so two
requests using one wallet at once get consecutive nonces. The node's pending count is
the source of truth (a stored counter would strand the wallet whenever the chain forgets
a transaction: a dropped one, a restarted devnet). When another process took the same
nonce first, the node refuses the broadcast and it is signed again with a fresh count.

Write-ahead senders (transfers) hold the lock themselves (`holding`), sign several
transactions with consecutive nonces (`sign`), store them, then broadcast the stored
bytes (`broadcast`), which is safe to repeat. Storing them takes a lock per (chain,
wallet) that every process shares and refuses nonces that another unfinished transfer
holds (`treasury.transfers.store.add_legs`): the sender then signs again, above them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..backends.chain.base import Chain
from ..backends.custody.base import Custody
from ..errors import UpstreamError

ATTEMPTS = 3
_HELD = ("already known", "known transaction", "already imported")
#: What a node says when it did not take a transaction (geth, anvil, reth, py-evm), or
#: when nothing reached it: a definite refusal. Anything else may have been sent on.
_REFUSED = (
    "unreachable",
    "refused the request",
    "nonce too low",
    "insufficient funds",
    "underpriced",
    "intrinsic gas",
    "fee cap",
    "max fee per gas",
    "max priority fee",
    "exceeds block gas limit",
    "gas limit reached",
    "invalid sender",
    "invalid chain id",
    "exceeds the configured cap",
)


@dataclass(frozen=True)
class Signed:
    raw: bytes
    hash: str  # 0x + 64 lowercase hex
    nonce: int


def broadcast(chain: Chain, transactions: Sequence[Signed]) -> None:
    """Send stored signed transactions in order. Sending the same bytes again is
    harmless: a node that already holds one, or has mined it ("nonce too low" with a
    receipt for that hash), counts it as sent. A failure is definite (`UpstreamError`)
    only when nothing reached the node or the node refused the transaction for a known
    reason (`_REFUSED`); any other (a gateway's 5xx, a proxy's internal error, a lost
    answer) may have been sent on, and is ambiguous: the same bytes are sent again."""
    for signed in transactions:
        try:
            chain.send_raw_transaction(signed.raw)
        except UpstreamError as error:
            message = error.message.lower()
            if any(text in message for text in _HELD):
                continue
            if "nonce too low" in message and _mined(chain, signed):
                continue
            if error.ambiguous or not any(text in message for text in _REFUSED):
                raise UpstreamError(error.message, ambiguous=True) from error
            raise


def broadcast_each(chain: Chain, transactions: Sequence[Signed]) -> list[UpstreamError | None]:
    """Send stored signed transactions in order, all of them, in as few requests as the
    chain allows (`Chain.send_raw_transactions`); for each, None when the node has it
    (taken now, already held, or mined) or the failure, definite or ambiguous as
    `broadcast` tells them. A failure of the whole is every transaction's."""
    try:
        answers = chain.send_raw_transactions([signed.raw for signed in transactions])
    except UpstreamError as error:
        return [error] * len(transactions)
    outcomes: list[UpstreamError | None] = []
    for signed, answer in zip(transactions, answers, strict=True):
        if not isinstance(answer, UpstreamError):
            outcomes.append(None)
            continue
        message = answer.message.lower()
        try:
            if any(text in message for text in _HELD) or (
                "nonce too low" in message and _mined(chain, signed)
            ):
                outcomes.append(None)
            elif answer.ambiguous or not any(text in message for text in _REFUSED):
                outcomes.append(UpstreamError(answer.message, ambiguous=True))
            else:
                outcomes.append(answer)
        except UpstreamError as error:  # the receipt could not be read
            outcomes.append(error)
    return outcomes


def _mined(chain: Chain, signed: Signed) -> bool:
    """Whether `signed` is mined; not knowing (the look-up failed) is not a refusal."""
    try:
        return chain.receipts([signed.hash])[0] is not None
    except UpstreamError as error:
        raise UpstreamError(error.message, ambiguous=True) from error


def unsigned(raw: bytes) -> dict[str, Any] | None:
    """The fields of a signed EIP-1559 transaction (nonce, to, value, data, gas and its
    two fee fields), to sign the same payment again at other fees; None for another type.
    Read straight from its RLP (the jobs look at every leg in flight, each pass)."""
    import rlp

    if not raw or raw[0] != 2:
        return None
    _, nonce, tip, fee_cap, gas, to, value, data, *_ = rlp.decode(bytes(raw[1:]))
    return {
        "nonce": _number(nonce),
        "to": "0x" + bytes(to).hex(),
        "value": _number(value),
        "data": bytes(data),
        "gas": _number(gas),
        "maxFeePerGas": _number(fee_cap),
        "maxPriorityFeePerGas": _number(tip),
    }


def _number(field: bytes) -> int:
    """An RLP quantity: big-endian, no leading zeros (empty is 0)."""
    return int.from_bytes(field, "big")


def raised(
    offered: dict[str, int], base_fee: int, tip: int, cap: int | None
) -> dict[str, int] | None:
    """Fees for a replacement of a transaction that `offered` these fees: both raised by
    at least 12.5 % (nodes refuse a replacement under +10 %), the tip at least today's
    `tip`, the fee cap twice the `base_fee` plus the tip (at least the base fee plus the
    tip); never above `cap` (wei): None when even the least replacement would be."""
    priority = max(-(-offered["maxPriorityFeePerGas"] * 9 // 8), tip)
    least = max(-(-offered["maxFeePerGas"] * 9 // 8), base_fee + priority)
    wanted = max(least, 2 * base_fee + priority)
    if cap is not None:
        if least > cap:
            return None
        wanted = min(wanted, cap)
    return {"maxFeePerGas": wanted, "maxPriorityFeePerGas": min(priority, wanted)}


class Signer:
    def __init__(self, custody: Custody):
        self._custody = custody
        self._locks: dict[tuple[int, str], threading.RLock] = {}
        self._guard = threading.Lock()

    def _lock(self, chain_id: int, address: str) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault((chain_id, address), threading.RLock())

    @contextmanager
    def holding(self, chain_id: int, address: str) -> Iterator[None]:
        """Hold a wallet's lock: nobody else in this process signs for it meanwhile."""
        with self._lock(chain_id, address):
            yield

    def sign(
        self,
        chain: Chain,
        *,
        custody_ref: str,
        nonce: int,
        to: str,
        data: bytes = b"",
        value: int = 0,
        gas: int,
        fees: dict[str, int],
    ) -> Signed:
        """A signed transaction with the given nonce (call under `holding`)."""
        from eth_utils.address import to_checksum_address
        from eth_utils.crypto import keccak

        transaction: dict[str, Any] = {
            "chainId": chain.chain_id,
            "nonce": nonce,
            "to": to_checksum_address(to),  # eth-account refuses all-lowercase
            "data": data,
            "value": value,
            "gas": gas,
            **fees,
        }
        raw = self._custody.sign_transaction(custody_ref, transaction)
        return Signed(raw=raw, hash="0x" + keccak(raw).hex(), nonce=nonce)

    def sign_many(
        self, chain: Chain, *, custody_ref: str, transactions: Sequence[dict[str, Any]]
    ) -> list[Signed]:
        """`sign` for several transactions of one key, each a dict of `nonce`, `to`,
        `data`, `gas` and `fees` (and `value`), signed in one call to custody."""
        from eth_utils.address import to_checksum_address
        from eth_utils.crypto import keccak

        prepared = [
            {
                "chainId": chain.chain_id,
                "nonce": t["nonce"],
                "to": to_checksum_address(t["to"]),  # eth-account refuses all-lowercase
                "data": t.get("data", b""),
                "value": t.get("value", 0),
                "gas": t["gas"],
                **t["fees"],
            }
            for t in transactions
        ]
        raws = self._custody.sign_transactions(custody_ref, prepared)
        return [
            Signed(raw=raw, hash="0x" + keccak(raw).hex(), nonce=int(t["nonce"]))
            for raw, t in zip(raws, transactions, strict=True)
        ]

    def send(
        self,
        chain: Chain,
        *,
        custody_ref: str,
        sender: str,
        to: str,
        data: bytes = b"",
        value: int = 0,
        gas: int | None = None,
        floor: int = 0,
    ) -> str:
        """Sign with custody and broadcast; return the transaction hash. `floor`: the
        lowest nonce to use (above nonces that stored, unsent transactions hold)."""
        from eth_utils.address import to_checksum_address

        call = {"from": sender, "to": to, "data": data, "value": value}
        with self._lock(chain.chain_id, sender):
            for attempt in range(ATTEMPTS):
                transaction: dict[str, Any] = {
                    "chainId": chain.chain_id,
                    "nonce": max(chain.pending_nonce(sender), floor),
                    "to": to_checksum_address(to),  # eth-account refuses all-lowercase
                    "data": data,
                    "value": value,
                    "gas": gas or chain.estimate_gas(call),
                    **chain.offered_fees(),
                }
                raw = self._custody.sign_transaction(custody_ref, transaction)
                try:
                    return chain.send_raw_transaction(raw)
                except UpstreamError as error:
                    if "nonce" not in error.message.lower() or attempt == ATTEMPTS - 1:
                        raise
        raise AssertionError("unreachable")
