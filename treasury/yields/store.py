"""The yield tables: snapshots of holders' c0 balances, and published periods."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from .._infra.clock import to_text
from ..backends.storage.base import Row, Transaction
from .periods import Snapshot


def holders(tx: Transaction) -> list[str]:
    """Every address the service knows: managed, tracked and virtual wallets of every
    organization, in ascending order."""
    rows = tx.query(
        "SELECT address FROM wallets WHERE deleted_at IS NULL"
        " UNION SELECT address FROM virtual_wallets ORDER BY address"
    )
    return [row["address"] for row in rows]


def last_taken(tx: Transaction, chain_id: int) -> datetime | None:
    row = tx.one(
        "SELECT MAX(taken_at) AS taken_at FROM yield_snapshots WHERE chain_id = ?", (chain_id,)
    )
    return (
        None if row is None or row["taken_at"] is None else datetime.fromisoformat(row["taken_at"])
    )


def first_taken(tx: Transaction, chain_id: int) -> datetime | None:
    row = tx.one(
        "SELECT MIN(taken_at) AS taken_at FROM yield_snapshots WHERE chain_id = ?", (chain_id,)
    )
    return (
        None if row is None or row["taken_at"] is None else datetime.fromisoformat(row["taken_at"])
    )


def add_snapshot(
    tx: Transaction, chain_id: int, taken_at: datetime, apy: Decimal, balances: Mapping[str, int]
) -> None:
    row = tx.one(
        "INSERT INTO yield_snapshots (chain_id, taken_at, apy) VALUES (?, ?, ?) RETURNING id",
        (chain_id, to_text(taken_at), str(apy)),
    )
    assert row is not None
    for address, balance in balances.items():
        tx.execute(
            "INSERT INTO yield_balances (snapshot_id, address, balance) VALUES (?, ?, ?)",
            (row["id"], address, str(balance)),
        )


def snapshots(tx: Transaction, chain_id: int, start: datetime, end: datetime) -> list[Snapshot]:
    """The snapshots a period [start, end) is computed from, in time order: the last one
    taken at or before `start`, and every one taken inside the period."""
    rows = tx.query(
        "SELECT s.id, s.taken_at, s.apy, b.address, b.balance FROM yield_snapshots s"
        " LEFT JOIN yield_balances b ON b.snapshot_id = s.id"
        " WHERE s.chain_id = ? AND s.taken_at < ? AND s.taken_at >= COALESCE("
        "  (SELECT MAX(taken_at) FROM yield_snapshots WHERE chain_id = ? AND taken_at <= ?), ?)"
        " ORDER BY s.taken_at, s.id",
        (chain_id, to_text(end), chain_id, to_text(start), to_text(start)),
    )
    taken: dict[int, tuple[Row, dict[str, int]]] = {}
    for row in rows:
        _, balances = taken.setdefault(row["id"], (row, {}))
        if row["address"] is not None:
            balances[row["address"]] = int(row["balance"])
    return [
        Snapshot(datetime.fromisoformat(row["taken_at"]), Decimal(row["apy"]), balances)
        for row, balances in taken.values()
    ]


def published_ids(tx: Transaction, chain_id: int, low: int, high: int) -> set[int]:
    """The periods of `chain_id` in [low, high) already built (with or without claims)."""
    rows = tx.query(
        "SELECT period_id FROM yield_periods WHERE chain_id = ? AND period_id >= ?"
        " AND period_id < ?",
        (chain_id, low, high),
    )
    return {int(row["period_id"]) for row in rows}
