"""The deposit tables: each chain's log cursor, and the deposits found (one row per log
and organization, the guard that announces each once)."""

from __future__ import annotations

from ..backends.storage.base import Transaction


def cursor(tx: Transaction, chain_id: int) -> int | None:
    """The first block of the chain not scanned yet; None before the first pass."""
    row = tx.one("SELECT next_block FROM log_cursors WHERE chain_id = ?", (chain_id,))
    return None if row is None else int(row["next_block"])


def start(tx: Transaction, chain_id: int, block: int, now: str) -> None:
    """Begin watching a chain at `block` (a second starter changes nothing)."""
    tx.execute(
        "INSERT INTO log_cursors (chain_id, next_block, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (chain_id) DO NOTHING",
        (chain_id, block, now),
    )


def advance(tx: Transaction, chain_id: int, block: int, now: str) -> None:
    tx.execute(
        "UPDATE log_cursors SET next_block = ?, updated_at = ? WHERE chain_id = ?",
        (block, now, chain_id),
    )


def insert(
    tx: Transaction,
    *,
    chain_id: int,
    tx_hash: str,
    log_index: int,
    org_id: str,
    address: str,
    token: str,
    raw: int,
    sender: str,
    block_number: int,
    now: str,
) -> bool:
    """Record a deposit for an organization; False when it was recorded before."""
    values = (
        chain_id,
        tx_hash,
        log_index,
        org_id,
        address,
        token,
        str(raw),
        sender,
        block_number,
        now,
    )
    return bool(
        tx.execute(
            "INSERT INTO deposits (chain_id, hash, log_index, org_id, address, token, raw,"
            " sender, block_number, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            values,
        )
    )
