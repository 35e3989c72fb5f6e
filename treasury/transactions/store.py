"""The transactions domain's own statements on the transactions table: the
organization's feed and the indexer's pending rows and their resolution. What other
domains write and read of the table (a transfer's legs, a gas top-up) is in
`_records.transactions`."""

from __future__ import annotations

from typing import Any

from .._infra.sql import keyset_page
from .._records.transactions import COLUMNS
from ..backends.storage.base import Row, Transaction


def page(
    tx: Transaction,
    org_id: str,
    chain_id: int,
    wallet: str | None,
    after: tuple[Any, Any] | None,
    limit: int,
) -> tuple[list[Row], tuple[Any, Any] | None]:
    """An organization's tracked transactions on a chain, newest first by (created_at,
    id), one wallet's when `wallet` is given: a seek on a feed index at any depth."""
    select = f"SELECT id, {COLUMNS} FROM transactions WHERE org_id = ? AND chain_id = ?"
    params: list[Any] = [org_id, chain_id]
    if wallet is not None:
        select += " AND wallet_address = ?"
        params.append(wallet.lower())
    return keyset_page(tx, select, params, after, limit)


def pending(tx: Transaction, chain_id: int, after_id: int, limit: int) -> list[Row]:
    """A page of pending transactions (`id`, `hash`) of one chain, in id order."""
    return tx.query(
        "SELECT id, hash FROM transactions"
        " WHERE chain_id = ? AND status = 'pending' AND id > ? ORDER BY id LIMIT ?",
        (chain_id, after_id, limit),
    )


def resolve(
    tx: Transaction, chain_id: int, tx_hash: str, status: str, receipt: str, now: str
) -> list[Row]:
    """Move the pending rows of a mined hash (one per organization that tracks it) to
    `status`; the rows moved, with `wallet_address`. Guarded: a row moves once."""
    return tx.query(
        "UPDATE transactions SET status = ?, receipt = ?, updated_at = ?"
        " WHERE chain_id = ? AND hash = ? AND status = 'pending'"
        f" RETURNING {COLUMNS}, wallet_address",
        (status, receipt, now, chain_id, tx_hash),
    )
