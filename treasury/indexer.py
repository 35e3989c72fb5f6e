"""The indexer: resolve pending transactions from their receipts, emitting events.

Receipts are fetched by hash in batches (never by scanning logs); each batch of status
changes and its `transaction.confirmed` / `transaction.failed` events is written in one
storage transaction, so an event exists exactly when its status change does.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from ._runtime import Runtime
from .backends.chain.base import Receipt
from .ops.transactions import COLUMNS, transaction_from_row
from .webhooks.outbox import emit

log = logging.getLogger("treasury.indexer")

PAGE = 5_000  # pending transactions read per pass of the loop
WRITE_BATCH = 500  # status changes per storage transaction


@dataclass
class IndexResult:
    confirmed: int = 0
    failed: int = 0


def receipt_json(chain_id: int, receipt: Receipt, now: str) -> dict[str, object]:
    """The receipt as the specification types it; absent strings are empty."""
    return {
        "chainId": chain_id,
        "hash": receipt.transaction_hash,
        "from": receipt.sender,
        "to": receipt.to or "",
        "transactionIndex": receipt.transaction_index,
        "blockHash": receipt.block_hash,
        "blockNumber": receipt.block_number,
        "type": receipt.type,
        "contractAddress": receipt.contract_address or "",
        "status": receipt.status,
        "root": receipt.root or "",
        "createdAt": now,
        "updatedAt": now,
    }


def index_chain(runtime: Runtime, chain_id: int) -> IndexResult:
    """Move every pending transaction of `chain_id` that has been mined."""
    chain = runtime.chains.get(chain_id)
    result = IndexResult()
    last_id = 0
    while True:
        with runtime.storage.read() as tx:
            rows = tx.query(
                "SELECT id, hash FROM transactions"
                " WHERE chain_id = ? AND status = 'pending' AND id > ? ORDER BY id LIMIT ?",
                (chain_id, last_id, PAGE),
            )
        if not rows:
            return result
        last_id = rows[-1]["id"]
        hashes = list(dict.fromkeys(row["hash"] for row in rows))
        mined = [(h, r) for h, r in zip(hashes, chain.receipts(hashes), strict=True) if r]
        for start in range(0, len(mined), WRITE_BATCH):
            _apply(runtime, chain_id, mined[start : start + WRITE_BATCH], result)


def _apply(
    runtime: Runtime, chain_id: int, mined: list[tuple[str, Receipt]], result: IndexResult
) -> None:
    now = runtime.now_text()
    with runtime.storage.transaction() as tx:
        for tx_hash, receipt in mined:
            status = "confirmed" if receipt.status == 1 else "failed"
            rows = tx.query(
                "UPDATE transactions SET status = ?, receipt = ?, updated_at = ?"
                " WHERE chain_id = ? AND hash = ? AND status = 'pending'"
                f" RETURNING {COLUMNS}, wallet_address",
                (status, json.dumps(receipt_json(chain_id, receipt, now)), now, chain_id, tx_hash),
            )
            for row in rows:
                emit(
                    tx,
                    org_id=row["org_id"],
                    event_type=f"transaction.{status}",
                    wallet_address=row["wallet_address"],
                    data=transaction_from_row(row).to_json(),
                    now=now,
                )
                if status == "confirmed":
                    result.confirmed += 1
                else:
                    result.failed += 1
