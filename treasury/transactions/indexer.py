"""The indexer job: resolve pending transactions from their receipts, emitting events.

A receipt counts once the chain's `confirmations` blocks are on top of its block (0 on a
chain that can mint: at once); until then the transaction stays pending.

Receipts are fetched by hash in batches (never by scanning logs); each batch of status
changes and its `transaction.confirmed` / `transaction.failed` events is written in one
storage transaction, so an event exists exactly when its status change does.
"""

from __future__ import annotations

import json

from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records.events import emit
from ..backends.chain.base import Receipt
from . import store
from .models import shown

PAGE = 5_000  # pending transactions read per pass of the loop
WRITE_BATCH = 500  # status changes per storage transaction


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


def index_transactions(runtime: Runtime, report: Report) -> None:
    """Job: index every configured chain; a failing chain does not stop the others."""
    for chain_id in runtime.chains.ids():
        with report.part(f"chain {chain_id}"):
            report.add(index_chain(runtime, chain_id))


def index_chain(runtime: Runtime, chain_id: int) -> dict[str, int]:
    """Move every pending transaction of `chain_id` that has been mined; the counts."""
    chain = runtime.chains.get(chain_id)
    counts = {"transactions_confirmed": 0, "transactions_failed": 0}
    last_id = 0
    while True:
        with runtime.storage.read() as tx:
            rows = store.pending(tx, chain_id, last_id, PAGE)
        if not rows:
            return counts
        last_id = rows[-1]["id"]
        hashes = list(dict.fromkeys(row["hash"] for row in rows))
        mined = [(h, r) for h, r in zip(hashes, chain.receipts(hashes), strict=True) if r]
        if mined and chain.confirmations:  # final once `confirmations` blocks are on top
            safe = chain.head() - chain.confirmations
            mined = [(h, r) for h, r in mined if r.block_number <= safe]
        for start in range(0, len(mined), WRITE_BATCH):
            _apply(runtime, chain_id, mined[start : start + WRITE_BATCH], counts)


def _apply(
    runtime: Runtime, chain_id: int, mined: list[tuple[str, Receipt]], counts: dict[str, int]
) -> None:
    now = runtime.now_text()
    with runtime.storage.transaction() as tx:
        for tx_hash, receipt in mined:
            status = "confirmed" if receipt.status == 1 else "failed"
            receipt_text = json.dumps(receipt_json(chain_id, receipt, now))
            for row in store.resolve(tx, chain_id, tx_hash, status, receipt_text, now):
                emit(
                    tx,
                    org_id=row["org_id"],
                    event_type=f"transaction.{status}",
                    wallet_address=row["wallet_address"],
                    data=shown(row).to_json(),
                    now=now,
                )
                counts[f"transactions_{status}"] += 1
