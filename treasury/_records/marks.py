"""The blocks the service acted on, and whether each is still the chain's.

A mark is kept for every receipt a transfer was settled by (kind ``leg``, ref: the
transfer's id), every deposit log recorded (``deposit``, ref: ``hash:logIndex``) and the
deposit detector's cursor (``cursor``, ref: the block it scanned up to): the block's
number and hash. Each pass the reorg check (`treasury.reorgs`) compares the marks within
`REACH` of the head with the canonical chain in one request and flags those whose block
left it (`orphaned`); the domain that made a mark acts on its flagged marks and drops
them. Marks that fall out of reach are forgotten.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..backends.storage.base import Transaction

#: How far back, in blocks from the head, marks are compared with the canonical chain.
REACH = 128
Kind = Literal["leg", "deposit", "cursor"]


@dataclass(frozen=True)
class Mark:
    kind: Kind
    ref: str
    block_number: int
    block_hash: str


def put(
    tx: Transaction, chain_id: int, kind: Kind, ref: str, block_number: int, block_hash: str
) -> None:
    """Keep (or move) the mark of `ref`: it stands on that block, canonical as of now."""
    tx.execute(
        "INSERT INTO chain_marks (chain_id, kind, ref, block_number, block_hash, orphaned)"
        " VALUES (?, ?, ?, ?, ?, 0) ON CONFLICT (chain_id, kind, ref) DO UPDATE SET"
        " block_number = excluded.block_number, block_hash = excluded.block_hash, orphaned = 0",
        (chain_id, kind, ref, block_number, block_hash),
    )


def drop(tx: Transaction, chain_id: int, kind: Kind, ref: str) -> None:
    tx.execute(
        "DELETE FROM chain_marks WHERE chain_id = ? AND kind = ? AND ref = ?",
        (chain_id, kind, ref),
    )


def within(tx: Transaction, chain_id: int, lowest: int) -> list[Mark]:
    """The marks at block `lowest` or above not flagged yet (the reorg check's work)."""
    rows = tx.query(
        "SELECT kind, ref, block_number, block_hash FROM chain_marks"
        " WHERE chain_id = ? AND block_number >= ? AND orphaned = 0",
        (chain_id, lowest),
    )
    return [_mark(row) for row in rows]


def orphan(tx: Transaction, chain_id: int, found: Sequence[Mark]) -> None:
    """Flag marks whose block is no longer the canonical one at its height."""
    for mark in found:
        tx.execute(
            "UPDATE chain_marks SET orphaned = 1 WHERE chain_id = ? AND kind = ? AND ref = ?"
            " AND block_hash = ?",
            (chain_id, mark.kind, mark.ref, mark.block_hash),
        )


def orphaned(tx: Transaction, chain_id: int, kind: Kind) -> list[Mark]:
    """The flagged marks of `kind` on a chain, lowest block first."""
    rows = tx.query(
        "SELECT kind, ref, block_number, block_hash FROM chain_marks"
        " WHERE chain_id = ? AND kind = ? AND orphaned = 1 ORDER BY block_number",
        (chain_id, kind),
    )
    return [_mark(row) for row in rows]


def forget_below(tx: Transaction, chain_id: int, lowest: int) -> int:
    """Forget the unflagged marks below block `lowest` (out of reach); how many."""
    return tx.execute(
        "DELETE FROM chain_marks WHERE chain_id = ? AND block_number < ? AND orphaned = 0",
        (chain_id, lowest),
    )


def _mark(row: dict[str, object]) -> Mark:
    return Mark(
        kind=row["kind"],  # type: ignore[arg-type]
        ref=str(row["ref"]),
        block_number=int(str(row["block_number"])),
        block_hash=str(row["block_hash"]),
    )


def highest(tx: Transaction, chain_id: int, kind: Kind) -> int | None:
    """The highest block a mark of `kind` stands on, not flagged (for ``cursor``: how far
    the deposit detector has scanned, on the canonical chain); None without one."""
    row = tx.one(
        "SELECT MAX(block_number) AS top FROM chain_marks WHERE chain_id = ? AND kind = ?"
        " AND orphaned = 0",
        (chain_id, kind),
    )
    return None if row is None or row["top"] is None else int(str(row["top"]))


def of(tx: Transaction, chain_id: int, kind: Kind, ref: str) -> Mark | None:
    """The mark of `ref`, if kept."""
    row = tx.one(
        "SELECT kind, ref, block_number, block_hash FROM chain_marks"
        " WHERE chain_id = ? AND kind = ? AND ref = ?",
        (chain_id, kind, ref),
    )
    return None if row is None else _mark(row)
