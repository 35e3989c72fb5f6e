"""Sending from managed wallets: custody signs, and nonces are allocated per wallet.

One lock per (chain, wallet) in the process serialises nonce → sign → broadcast, so two
requests using one wallet at once get consecutive nonces. The node's pending count is
the source of truth (a stored counter would strand the wallet whenever the chain forgets
a transaction: a dropped one, a restarted devnet). When another process took the same
nonce first, the node refuses the broadcast and it is signed again with a fresh count.
"""

from __future__ import annotations

import threading
from typing import Any

from ..backends.chain.base import Chain
from ..backends.custody.base import Custody
from ..errors import UpstreamError

ATTEMPTS = 3


class Signer:
    def __init__(self, custody: Custody):
        self._custody = custody
        self._locks: dict[tuple[int, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, chain_id: int, address: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((chain_id, address), threading.Lock())

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
    ) -> str:
        """Sign with custody and broadcast; return the transaction hash."""
        from eth_utils.address import to_checksum_address

        call = {"from": sender, "to": to, "data": data, "value": value}
        with self._lock(chain.chain_id, sender):
            for attempt in range(ATTEMPTS):
                transaction: dict[str, Any] = {
                    "chainId": chain.chain_id,
                    "nonce": chain.pending_nonce(sender),
                    "to": to_checksum_address(to),  # eth-account refuses all-lowercase
                    "data": data,
                    "value": value,
                    "gas": gas or chain.estimate_gas(call),
                    **chain.fee_fields(),
                }
                raw = self._custody.sign_transaction(custody_ref, transaction)
                try:
                    return chain.send_raw_transaction(raw)
                except UpstreamError as error:
                    if "nonce" not in error.message.lower() or attempt == ATTEMPTS - 1:
                        raise
        raise AssertionError("unreachable")
