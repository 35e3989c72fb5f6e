"""The books' reads: balances at a time and statements from the running sums (one seek
each, whatever the journal's length), what was posted at a block, reconciliation runs,
each pair's last tie-out, and pages of breaks. The journal is written by
`treasury._records.journal`, the breaks by `treasury._records.breaks`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from .._infra.sql import insert_numbered
from .._records.breaks import COLUMNS as BREAK_COLUMNS
from .._records.breaks import OPEN
from ..backends.storage.base import Row, Transaction

#: A time before every posting.
BEGINNING = "0001-01-01T00:00:00.000000+00:00"


def balance_before(
    tx: Transaction, org_id: str, account: str, chain_id: int, token: str, at: str
) -> int:
    """An account's balance from postings made before `at`: the running sum of its last
    row before it (one index seek)."""
    row = tx.one(
        "SELECT balance FROM journal WHERE org_id = ? AND account = ? AND chain_id = ?"
        " AND token = ? AND at < ? ORDER BY at DESC, id DESC LIMIT 1",
        (org_id, account, chain_id, token, at),
    )
    return 0 if row is None or row["balance"] is None else int(row["balance"])


def entries(
    tx: Transaction, org_id: str, account: str, chain_id: int, token: str, start: str, end: str
) -> Iterator[list[Row]]:
    """An account's postings from `start` (included) to `end` (excluded), oldest first,
    in chunks read as they are consumed."""
    return tx.stream(
        "SELECT at, amount, balance, kind, transfer_id, deposit_id, transaction_hash"
        " FROM journal WHERE org_id = ? AND account = ? AND chain_id = ? AND token = ?"
        " AND at >= ? AND at < ? ORDER BY at, id",
        (org_id, account, chain_id, token, start, end),
        size=500,
    )


def count_entries(
    tx: Transaction, org_id: str, account: str, chain_id: int, token: str, start: str, end: str
) -> int:
    row = tx.one(
        "SELECT COUNT(*) AS n FROM journal WHERE org_id = ? AND account = ? AND chain_id = ?"
        " AND token = ? AND at >= ? AND at < ?",
        (org_id, account, chain_id, token, start, end),
    )
    return 0 if row is None else int(row["n"])


def moved_out(
    tx: Transaction, org_id: str, transfer_ids: Sequence[str], account: str, before: str
) -> set[str]:
    """Of `transfer_ids`, those whose movement out of `account` was posted before
    `before` (their reservation is in the posted balance from then on)."""
    found: set[str] = set()
    unique = sorted(set(transfer_ids))
    for begin in range(0, len(unique), 500):
        batch = unique[begin : begin + 500]
        marks = ", ".join("?" * len(batch))
        rows = tx.query(
            f"SELECT DISTINCT transfer_id FROM journal WHERE transfer_id IN ({marks})"
            " AND org_id = ? AND account = ? AND at < ? AND amount LIKE '-%'",
            (*batch, org_id, account, before),
        )
        found |= {str(row["transfer_id"]) for row in rows}
    return found


# -- posted at a block ---------------------------------------------------------------------


def posted_now(tx: Transaction, org_id: str, chain_id: int) -> dict[tuple[str, str], int]:
    """Every wallet account's running sum of the organization on a chain, by (account,
    token)."""
    rows = tx.query(
        "SELECT account, token, posted FROM journal_balances WHERE org_id = ? AND chain_id = ?"
        " AND account LIKE 'wallet:%'",
        (org_id, chain_id),
    )
    return {(str(r["account"]), str(r["token"])): int(r["posted"]) for r in rows}


def posted_after(
    tx: Transaction, org_id: str, chain_id: int, block: int
) -> dict[tuple[str, str], int]:
    """What the organization's wallet accounts were posted for blocks above `block` (the
    newest few: a seek on the block index), by (account, token)."""
    rows = tx.query(
        "SELECT account, token, amount FROM journal WHERE org_id = ? AND chain_id = ?"
        " AND block_number > ?",
        (org_id, chain_id, block),
    )
    found: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        found[(str(row["account"]), str(row["token"]))] += int(row["amount"])
    return dict(found)


def postings_between(
    tx: Transaction, org_id: str, chain_id: int, account: str, token: str, first: int, last: int
) -> list[Row]:
    """A wallet account's postings for blocks `first`..`last` (a difference's evidence)."""
    return tx.query(
        "SELECT amount, block_number, transfer_id, deposit_id, transaction_hash, kind"
        " FROM journal WHERE org_id = ? AND chain_id = ? AND block_number >= ?"
        " AND block_number <= ? AND account = ? AND token = ?",
        (org_id, chain_id, first, last, account, token),
    )


# -- runs and pairs ------------------------------------------------------------------------

RUN_COLUMNS = "number, at, chain_id, block_number, pairs, tied_out, in_flight, breaks_open"


def add_run(tx: Transaction, org_id: str, values: dict[str, Any]) -> int:
    """Record a run, numbered in its organization; its number."""
    row = insert_numbered(tx, "reconciliation_runs", org_id, values, "number")
    assert row is not None
    return int(row["number"])


def last_run(tx: Transaction, org_id: str) -> Row | None:
    return tx.one(
        f"SELECT {RUN_COLUMNS} FROM reconciliation_runs WHERE org_id = ?"
        " ORDER BY number DESC LIMIT 1",
        (org_id,),
    )


def last_run_at(tx: Transaction, chain_id: int) -> str | None:
    """When the chain was last reconciled (any organization)."""
    row = tx.one("SELECT MAX(at) AS at FROM reconciliation_runs WHERE chain_id = ?", (chain_id,))
    return None if row is None or row["at"] is None else str(row["at"])


def last_block(tx: Transaction, org_id: str, chain_id: int) -> int | None:
    """The block of the organization's last run on a chain."""
    row = tx.one(
        "SELECT block_number FROM reconciliation_runs WHERE org_id = ? AND chain_id = ?"
        " ORDER BY number DESC LIMIT 1",
        (org_id, chain_id),
    )
    return None if row is None else int(row["block_number"])


def untied(tx: Transaction, org_id: str, chain_id: int) -> dict[tuple[str, str], int | None]:
    """The pairs that differed at the last run, with the block each last tied out at."""
    rows = tx.query(
        "SELECT wallet, token, tied_block FROM reconciliation_pairs WHERE org_id = ?"
        " AND chain_id = ?",
        (org_id, chain_id),
    )
    return {
        (str(r["wallet"]), str(r["token"])): None
        if r["tied_block"] is None
        else int(r["tied_block"])
        for r in rows
    }


def untie(
    tx: Transaction, org_id: str, chain_id: int, wallet: str, token: str, tied: int | None
) -> None:
    """A pair differs: remember where it last tied out (kept while it differs)."""
    tx.execute(
        "INSERT INTO reconciliation_pairs (org_id, chain_id, wallet, token, tied_block)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (org_id, chain_id, wallet, token) DO NOTHING",
        (org_id, chain_id, wallet, token, tied),
    )


def accepted(
    tx: Transaction, org_id: str, chain_id: int, wallet: str, token: str, block: int
) -> None:
    """A difference accepted at `block` (a correction posted there): the pair's evidence
    is looked for after it from now on."""
    tx.execute(
        "UPDATE reconciliation_pairs SET tied_block = ? WHERE org_id = ? AND chain_id = ?"
        " AND wallet = ? AND token = ? AND (tied_block IS NULL OR tied_block < ?)",
        (block, org_id, chain_id, wallet, token, block),
    )


def retie(tx: Transaction, org_id: str, chain_id: int, wallet: str, token: str) -> None:
    """A pair ties out again."""
    tx.execute(
        "DELETE FROM reconciliation_pairs WHERE org_id = ? AND chain_id = ? AND wallet = ?"
        " AND token = ?",
        (org_id, chain_id, wallet, token),
    )


# -- breaks --------------------------------------------------------------------------------


def open_breaks(tx: Transaction, org_id: str, chain_id: int | None = None) -> list[Row]:
    sql = f"SELECT {BREAK_COLUMNS} FROM reconciliation_breaks WHERE org_id = ? AND status = ?"
    params: list[Any] = [org_id, OPEN]
    if chain_id is not None:
        sql += " AND chain_id = ?"
        params.append(chain_id)
    return tx.query(sql + " ORDER BY number", params)


def breaks_page(
    tx: Transaction, org_id: str, status: str | None, after: int | None, limit: int
) -> tuple[list[Row], int | None]:
    """Newest first by number; the number of the last row when another page follows."""
    sql = f"SELECT {BREAK_COLUMNS} FROM reconciliation_breaks WHERE org_id = ?"
    params: list[Any] = [org_id]
    if status is not None:
        sql += " AND status = ?"
        params.append(status)
    if after is not None:
        sql += " AND number < ?"
        params.append(after)
    rows = tx.query(sql + " ORDER BY number DESC LIMIT ?", (*params, limit + 1))
    if len(rows) <= limit:
        return rows, None
    return rows[:limit], int(rows[limit - 1]["number"])


def held_at_provider(
    tx: Transaction, org_id: str, chain_id: int, token: str
) -> dict[str, tuple[int, str]]:
    """What the books hold at the provider, by transfer id: (raw units, last posted at)."""
    rows = tx.query(
        "SELECT account, posted, last_at FROM journal_balances WHERE org_id = ? AND chain_id = ?"
        " AND token = ? AND account LIKE 'provider:%' AND posted <> '0'",
        (org_id, chain_id, token),
    )
    return {
        str(r["account"]).removeprefix("provider:"): (int(r["posted"]), str(r["last_at"]))
        for r in rows
    }
