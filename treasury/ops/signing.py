"""Sending from managed wallets: custody signs, and nonces are allocated per wallet.

One lock per (chain, wallet) in the process serialises allocate → sign → broadcast, so
two requests using one wallet at once get consecutive nonces. The next nonce is the
larger of the node's pending count and the last one this library broadcast (stored, so
a node that lags behind its own mempool cannot hand out a nonce twice).
"""

from __future__ import annotations

import threading
from typing import Any

from ..backends.chain.base import Chain
from ..backends.custody.base import Custody
from ..backends.storage.base import Storage


class Signer:
    def __init__(self, storage: Storage, custody: Custody):
        self._storage = storage
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

        with self._lock(chain.chain_id, sender):
            with self._storage.read() as tx:
                row = tx.one(
                    "SELECT next_nonce FROM wallet_nonces WHERE chain_id = ? AND address = ?",
                    (chain.chain_id, sender),
                )
            nonce = max(row["next_nonce"] if row else 0, chain.pending_nonce(sender))
            call = {"from": sender, "to": to, "data": data, "value": value}
            transaction: dict[str, Any] = {
                "chainId": chain.chain_id,
                "nonce": nonce,
                "to": to_checksum_address(to),  # eth-account refuses all-lowercase addresses
                "data": data,
                "value": value,
                "gas": gas or chain.estimate_gas(call),
                **chain.fee_fields(),
            }
            tx_hash = chain.send_raw_transaction(
                self._custody.sign_transaction(custody_ref, transaction)
            )
            with self._storage.transaction() as tx:
                tx.execute(
                    "INSERT INTO wallet_nonces (chain_id, address, next_nonce) VALUES (?, ?, ?)"
                    " ON CONFLICT (chain_id, address) DO UPDATE SET next_nonce = excluded.next_nonce"
                    " WHERE excluded.next_nonce > wallet_nonces.next_nonce",
                    (chain.chain_id, sender, nonce + 1),
                )
            return tx_hash
