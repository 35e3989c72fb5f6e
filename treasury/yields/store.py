"""The yield tables: snapshots of holders' c0 balances, and published periods."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from .._infra.clock import to_text
from ..backends.storage.base import Row, Transaction
from .models import YieldPeriod
from .periods import Snapshot


def snapshot_times(tx: Transaction, chain_id: int) -> tuple[datetime | None, datetime | None]:
    """When a chain's first and last snapshots were taken; (None, None) before any."""
    row = tx.one(
        "SELECT MIN(taken_at) AS first, MAX(taken_at) AS last FROM yield_snapshots"
        " WHERE chain_id = ?",
        (chain_id,),
    )
    if row is None or row["first"] is None:
        return None, None
    return datetime.fromisoformat(row["first"]), datetime.fromisoformat(row["last"])


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


def built_periods(tx: Transaction, chain_id: int, low: int, high: int) -> set[int]:
    """The periods of `chain_id` in [low, high) already built (with or without claims)."""
    rows = tx.query(
        "SELECT period_id FROM yield_periods WHERE chain_id = ? AND period_id >= ?"
        " AND period_id < ?",
        (chain_id, low, high),
    )
    return {int(row["period_id"]) for row in rows}


def freeze(
    tx: Transaction,
    chain_id: int,
    period_id: int,
    start: datetime,
    end: datetime,
    now: datetime,
    period: YieldPeriod | None,
) -> bool:
    """Store a built period once (None: it has no claims): its row, its tree's
    ``standard-v1`` dump (the `artifact` column) and each holder's leaf with its proof
    (`yield_leaves`, where the proofs are kept, once); whether this call stored it. The
    API's `YieldPeriod` is assembled from these when it is read
    (`yields.artifacts.stored_period`)."""
    root, total, count = (
        (None, "0", 0) if period is None else (period.root, period.total, period.count)
    )
    stored = tx.execute(
        "INSERT INTO yield_periods (chain_id, period_id, root, total, count, starts_at,"
        " ends_at, published_at, artifact) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (chain_id, period_id) DO NOTHING",
        (
            chain_id,
            period_id,
            root,
            total,
            count,
            to_text(start),
            to_text(end),
            to_text(now),
            None if period is None else json.dumps(period.tree),
        ),
    )
    if stored != 1:
        return False
    for leaf in period.leaves if period is not None else ():  # each holder's claim
        tx.execute(
            "INSERT INTO yield_leaves (chain_id, account, period_id, leaf_index, amount, proof)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (chain_id, leaf.account, period_id, leaf.index, leaf.amount, json.dumps(leaf.proof)),
        )
    return True


def published(tx: Transaction, chain_id: int | None = None) -> list[Row]:
    """Every period built with claims (of `chain_id`, or of every chain), newest first."""
    on_chain = "" if chain_id is None else " AND chain_id = ?"
    return tx.query(
        "SELECT chain_id, period_id, root, total, count, starts_at, ends_at, published_at"
        f" FROM yield_periods WHERE count > 0{on_chain} ORDER BY period_id DESC, chain_id",
        () if chain_id is None else (chain_id,),
    )


def artifact(tx: Transaction, chain_id: int, period_id: int) -> Row | None:
    """A published period's row with its stored tree (`artifact`), None if it is not
    published (or has no claims)."""
    return tx.one(
        "SELECT chain_id, period_id, root, total, count, starts_at, ends_at, published_at,"
        " artifact FROM yield_periods WHERE chain_id = ? AND period_id = ? AND count > 0",
        (chain_id, period_id),
    )


def claims(tx: Transaction, chain_id: int, account: str) -> list[Row]:
    """An address's claims on a chain, newest period first, with each period's root."""
    return tx.query(
        "SELECT l.period_id, l.leaf_index, l.amount, l.proof, p.root FROM yield_leaves l"
        " JOIN yield_periods p ON p.chain_id = l.chain_id AND p.period_id = l.period_id"
        " WHERE l.chain_id = ? AND l.account = ? ORDER BY l.period_id DESC",
        (chain_id, account),
    )


def unposted(tx: Transaction, chain_id: int) -> list[Row]:
    """Published periods whose root is not yet posted to the chain's distributor."""
    return tx.query(
        "SELECT period_id, root, total FROM yield_periods WHERE chain_id = ? AND count > 0"
        " AND root_tx IS NULL ORDER BY period_id",
        (chain_id,),
    )


def posted(tx: Transaction, chain_id: int, period_id: int, tx_hash: str) -> None:
    tx.execute(
        "UPDATE yield_periods SET root_tx = ? WHERE chain_id = ? AND period_id = ?",
        (tx_hash, chain_id, period_id),
    )
