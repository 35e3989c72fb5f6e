"""Of the transfers, what other domains read: the state table (whose open statuses the
nonces of signed legs are held by), and which transaction hashes our own transfers sent
(the deposit detector leaves those out). The transfers domain writes them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..backends.storage.base import Transaction


#: A transfer's status, as the API shows it.
Status = Literal["pending", "submitted", "completed", "failed"]
#: How far a transfer's upstream work went (see `treasury.transfers.store`); ``awaiting``:
#: none, the transfer waits for its approval.
Stage = Literal["awaiting", "claimed", "recorded"]
AWAITING: Stage = "awaiting"
CLAIMED: Stage = "claimed"
RECORDED: Stage = "recorded"
#: Where a transfer stands with four-eyes approval (DESIGN §3 Controls).
ApprovalStatus = Literal["not_required", "awaiting", "approved", "rejected", "expired"]

#: The state table: the statuses a transfer may move to, from each status. Statements
#: take statuses, stages and pairings from here and from `treasury.transfers.models` (as
#: parameters, or as the SQL lists built here), never as literals of their own.
NEXT: dict[Status, frozenset[Status]] = {
    "pending": frozenset({"submitted", "failed"}),
    "submitted": frozenset({"completed", "failed"}),
    "completed": frozenset(),
    "failed": frozenset(),
}


def sql_list(values: Sequence[str]) -> str:
    """`values` as an SQL list of literals (they come from the tables above, never input)."""
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


#: The statuses of a transfer that has not ended (those it may still move from), as SQL.
OPEN = sql_list([status for status, after in NEXT.items() if after])


def caused(tx: Transaction, chain_id: int, hashes: Sequence[str]) -> set[str]:
    """Which of `hashes` the service's own transfers sent (a leg) or were paid by (an
    on-ramp's payout)."""
    found: set[str] = set()
    unique = sorted(set(hashes))
    for begin in range(0, len(unique), 500):
        chunk = unique[begin : begin + 500]
        marks = ", ".join("?" * len(chunk))
        rows = tx.query(
            f"SELECT hash FROM transfer_legs WHERE chain_id = ? AND hash IN ({marks})"
            f" UNION SELECT transaction_hash AS hash FROM transfers"
            f" WHERE chain_id = ? AND transaction_hash IN ({marks})",
            (chain_id, *chunk, chain_id, *chunk),
        )
        found.update(str(row["hash"]) for row in rows)
    return found
