"""The books of a store made before them: migration 22's own step posts what the records
already prove, so an upgraded store ties out at its first reconciliation.

What is posted, oldest first, each as the fact's own group would have been
(`postings`), at the time the record gives:

- every deposit recorded and not reversed (into a managed or virtual wallet);
- every completed on-chain transfer (deposit, withdrawal, sweep);
- every off-ramp whose USDC send is proven (its tracked transaction confirmed, or the
  provider past awaiting its funds), and its payout once completed;
- every on-ramp the provider holds the dollars of, and its payout once completed.

The block of a chain fact comes from the records (a tracked transaction's receipt, a
chain mark, a deposit's log); where none holds it (a virtual wallet's sweep), the posting
has no block and counts at every height: it is history. Nothing is asked of a node but
the tokens' decimals (where the store holds something to post on that chain); a chain
no longer configured is left out.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from .._infra.runtime import Runtime
from ..backends.storage.base import Row, Transaction
from ..errors import TreasuryError
from . import postings

log = logging.getLogger("treasury.books")
_ONCHAIN = ("deposit", "withdraw", "sweep")


def post_history(tx: Transaction, runtime: Runtime) -> int:
    """Post the history the store holds (in the migration's transaction); how many facts.
    A fact that cannot be posted (a chain that does not answer its tokens' decimals) is
    left out with a warning, never a store that does not open: reconciliation shows it."""
    configured = set(runtime.chains.ids())
    blocks = _receipt_blocks(tx)
    facts: list[tuple[str, int, Callable[[], Any]]] = []
    for row in tx.query(
        "SELECT chain_id, hash, log_index, org_id, address, token, raw, sender, block_number,"
        " created_at FROM deposits WHERE reversed_at IS NULL"
    ):
        chain_id = int(row["chain_id"])
        if chain_id not in configured:
            continue
        facts.append((str(row["created_at"]), len(facts), _deposit(tx, runtime, row)))
    for row in tx.query(
        "SELECT id, org_id, pairing, status, amount, source, destination, chain_id,"
        " wallet_address, bank_account_id, transaction_hash, provider_state, updated_at"
        " FROM transfers WHERE stage = 'recorded' AND chain_id IS NOT NULL"
    ):
        if int(row["chain_id"]) not in configured:
            continue
        fact = _transfer(tx, runtime, row, blocks)
        if fact is not None:
            facts.append((str(row["updated_at"]), len(facts), fact))
    skipped = 0
    for _, _, post in sorted(facts, key=lambda fact: fact[:2]):
        try:  # each fact fails before it writes (amounts, decimals, balance are checked first)
            post()
        except (ValueError, TreasuryError) as error:
            skipped += 1
            log.warning("the books' history: a fact left out (%s)", error)
    if skipped:
        log.warning(
            "the books' history: %d of %d facts left out; reconciliation will show them",
            skipped,
            len(facts),
        )
    return len(facts) - skipped


def _receipt_blocks(tx: Transaction) -> dict[tuple[int, str], tuple[int, int]]:
    """The block and status of every tracked transaction with a receipt, by (chain, hash)."""
    found = {}
    for row in tx.query(
        "SELECT chain_id, hash, receipt FROM transactions WHERE receipt IS NOT NULL"
    ):
        receipt = json.loads(row["receipt"])
        found[(int(row["chain_id"]), str(row["hash"]))] = (
            int(receipt["blockNumber"]),
            int(receipt.get("status", 1)),
        )
    for row in tx.query("SELECT chain_id, ref, block_number FROM chain_marks WHERE kind = 'leg'"):
        transfer = tx.one("SELECT transaction_hash FROM transfers WHERE id = ?", (row["ref"],))
        if transfer is not None and transfer["transaction_hash"]:
            key = (int(row["chain_id"]), str(transfer["transaction_hash"]))
            found.setdefault(key, (int(row["block_number"]), 1))
    return found


def _deposit(tx: Transaction, runtime: Runtime, row: Row) -> Callable[[], Any]:
    def post() -> bool:
        chain = runtime.chains.get(int(row["chain_id"]))  # opened when something is posted
        token = next(
            (s for s in ("USDC", "USDT", "c0") if chain.addresses.get(s) == row["token"]), ""
        )
        paid_by = chain.addresses.get("yield_distributor")
        kind = "yield_claim" if paid_by is not None and row["sender"] == paid_by else "deposit"
        fields = {
            "chain_id": int(row["chain_id"]),
            "tx_hash": row["hash"],
            "log_index": int(row["log_index"]),
            "org_id": row["org_id"],
            "address": row["address"],
            "raw": row["raw"],
            "block_number": int(row["block_number"]),
        }
        return postings.deposit(
            tx, fields=fields, token=token, kind=kind, now=str(row["created_at"])
        )

    return post


def _transfer(
    tx: Transaction, runtime: Runtime, row: Row, blocks: dict[tuple[int, str], tuple[int, int]]
) -> Callable[[], Any] | None:
    chain_id, at = int(row["chain_id"]), str(row["updated_at"])
    sent = row["transaction_hash"]
    mined = blocks.get((chain_id, str(sent))) if sent else None

    def block_of(tx_hash: str | None) -> int | None:
        found = blocks.get((chain_id, str(tx_hash))) if tx_hash else None
        return None if found is None else found[0]

    completed = row["status"] == "completed"
    if row["pairing"] in _ONCHAIN:
        if not completed:
            return None
        return lambda: postings.swap_settled(tx, runtime, row, block_of(sent), sent, at=at)
    if row["pairing"] not in ("onramp", "offramp"):
        return None
    state = str(row["provider_state"] or "")
    if row["pairing"] == "offramp" and mined is not None and mined[1] == 1:
        state = state if state in postings.RECEIVED else "funds_received"  # its send is mined
    return lambda: postings.provider_state(
        tx, runtime, row, state, completed, at=at, block_of=block_of
    )
