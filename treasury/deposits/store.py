"""The deposit tables: each chain's log cursor, the deposits found (one row per log and
organization, the guard that announces each once; `reversed_at` once a reorg took its log
away), and the logs held while an open on-ramp of the organization may have paid them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..backends.storage.base import Row, Transaction


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


#: A log's deposit of an organization, as the detector gives it to the store (`Log`'s
#: fields, its recipient `address` and `sender`, and its `raw` amount).
LOG_FIELDS = (
    "chain_id",
    "tx_hash",
    "log_index",
    "org_id",
    "address",
    "token",
    "raw",
    "sender",
    "block_number",
)
_LOG_COLUMNS = "chain_id, hash, log_index, org_id, address, token, raw, sender, block_number"


def _add(tx: Transaction, table: str, fields: Mapping[str, Any], **also: Any) -> bool:
    """Insert a log's row into `table`: its `LOG_FIELDS`, then `also`, the table's own
    columns; False when it was there."""
    values = [str(fields[name]) if name == "raw" else fields[name] for name in LOG_FIELDS]
    columns = ", ".join([_LOG_COLUMNS, *also])
    marks = ", ".join("?" * (len(values) + len(also)))
    return bool(
        tx.execute(
            f"INSERT INTO {table} ({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING",
            (*values, *also.values()),
        )
    )


def insert(tx: Transaction, fields: Mapping[str, Any], now: str) -> bool:
    """Record a deposit for an organization (`fields`: `LOG_FIELDS`); False when it was
    recorded before."""
    return _add(tx, "deposits", fields, created_at=now)


def found(tx: Transaction, chain_id: int, tx_hash: str, log_index: int) -> list[Row]:
    """The deposits of a log, one per organization (`reversed_at` set once reversed)."""
    return tx.query(
        "SELECT chain_id, hash, log_index, org_id, address, token, raw, sender, block_number,"
        " reversed_at FROM deposits WHERE chain_id = ? AND hash = ? AND log_index = ?"
        " ORDER BY org_id",
        (chain_id, tx_hash, log_index),
    )


def reverse(
    tx: Transaction, chain_id: int, tx_hash: str, log_index: int, org_id: str, now: str
) -> bool:
    """Mark a deposit reversed (its log left the chain); False if it already was."""
    return bool(
        tx.execute(
            "UPDATE deposits SET reversed_at = ? WHERE chain_id = ? AND hash = ?"
            " AND log_index = ? AND org_id = ? AND reversed_at IS NULL",
            (now, chain_id, tx_hash, log_index, org_id),
        )
    )


def restore(
    tx: Transaction, chain_id: int, tx_hash: str, log_index: int, org_id: str, block_number: int
) -> bool:
    """A reversed deposit whose log came back: counted again, in its new block; False if
    it was not reversed."""
    return bool(
        tx.execute(
            "UPDATE deposits SET reversed_at = NULL, block_number = ? WHERE chain_id = ?"
            " AND hash = ? AND log_index = ? AND org_id = ? AND reversed_at IS NOT NULL",
            (block_number, chain_id, tx_hash, log_index, org_id),
        )
    )


def rewind(tx: Transaction, chain_id: int, block: int, now: str) -> None:
    """Move the cursor back to `block` (never forward), and forget the held logs from
    there on: the rescan finds again those still on the chain."""
    tx.execute(
        "UPDATE log_cursors SET next_block = ?, updated_at = ? WHERE chain_id = ?"
        " AND next_block > ?",
        (block, now, chain_id, block),
    )
    tx.execute("DELETE FROM held_logs WHERE chain_id = ? AND block_number >= ?", (chain_id, block))


# -- logs held while an open on-ramp may have paid them ------------------------------------


def hold(tx: Transaction, fields: Mapping[str, Any], block_hash: str, now: str) -> bool:
    """Hold a log for an organization (`fields`: `LOG_FIELDS`; first seen `now`); False
    if it was held before."""
    return _add(tx, "held_logs", fields, block_hash=block_hash, first_seen=now)


def holding(tx: Transaction, chain_id: int) -> bool:
    """Whether any log is held on a chain."""
    return (
        tx.one("SELECT 1 AS one FROM held_logs WHERE chain_id = ? LIMIT 1", (chain_id,)) is not None
    )


def held(tx: Transaction, chain_id: int) -> list[Row]:
    """The logs held on a chain, oldest first."""
    return tx.query(
        "SELECT chain_id, hash, log_index, org_id, address, token, raw, sender, block_number,"
        " block_hash, first_seen FROM held_logs WHERE chain_id = ?"
        " ORDER BY first_seen, hash, log_index, org_id",
        (chain_id,),
    )


def release(tx: Transaction, chain_id: int, tx_hash: str, log_index: int, org_id: str) -> None:
    """No longer hold a log (it became a deposit, or it was an on-ramp's payout)."""
    tx.execute(
        "DELETE FROM held_logs WHERE chain_id = ? AND hash = ? AND log_index = ? AND org_id = ?",
        (chain_id, tx_hash, log_index, org_id),
    )
