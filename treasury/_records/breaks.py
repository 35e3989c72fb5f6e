"""Reconciliation breaks: where the books and the chain (or the provider) disagree.

A break is ``{id, kind, chainId, wallet, token, expected, actual, difference,
blockNumber, evidence, status, openedAt, resolvedAt}`` (DESIGN §3 "The books"): `expected`
is the journal's posted balance at `blockNumber`, `actual` what the chain showed there,
`difference` = actual - expected (token units). Kinds: ``unexplained_inflow``,
``unexplained_outflow`` (money left a wallet with no leg of ours), ``missing_movement``
(the journal has it, the chain does not) and ``provider_mismatch``. One break is open per
(wallet, token, kind): a later difference of the same kind updates it. Opening and
resolving are announced (``reconciliation.break_opened`` and
``reconciliation.break_resolved``, data: the break) in the transaction that does it.

Reconciliation opens and resolves breaks; the transfers' reorg pass opens a
``missing_movement`` at once when a reorg removes a completed transfer's leg
(`open_missing_movement`), before any re-broadcast can hide it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Literal

from .._infra.sql import insert_numbered
from ..backends.storage.base import Row, Transaction
from . import journal
from .events import emit

Kind = Literal["unexplained_inflow", "unexplained_outflow", "missing_movement", "provider_mismatch"]
KINDS: tuple[Kind, ...] = (
    "unexplained_inflow",
    "unexplained_outflow",
    "missing_movement",
    "provider_mismatch",
)
OPEN = "open"
RESOLVED = "resolved"
COLUMNS = (
    "id, number, org_id, kind, chain_id, wallet, token, decimals, expected, actual,"
    " difference, block_number, evidence, status, opened_at, resolved_at, resolved_by, note"
)


def shown(row: Row) -> dict[str, Any]:
    """A break as the API answers it (and its events carry it)."""
    decimals = int(row["decimals"])
    return {
        "id": int(row["number"]),
        "kind": row["kind"],
        "chainId": int(row["chain_id"]),
        "wallet": row["wallet"],
        "token": row["token"],
        "expected": journal.signed_units(int(row["expected"]), decimals),
        "actual": journal.signed_units(int(row["actual"]), decimals),
        "difference": journal.signed_units(int(row["difference"]), decimals),
        "blockNumber": int(row["block_number"]),
        "evidence": json.loads(row["evidence"]),
        "status": row["status"],
        "openedAt": _zulu(row["opened_at"]),
        "resolvedAt": None if row["resolved_at"] is None else _zulu(row["resolved_at"]),
        "resolvedBy": None if row["resolved_by"] is None else json.loads(row["resolved_by"]),
        "note": row["note"],
    }


def _zulu(text: str) -> str:
    return text.replace("+00:00", "Z")


def open_ones(tx: Transaction, org_id: str, chain_id: int, wallet: str, token: str) -> list[Row]:
    """The open breaks of one (wallet, token)."""
    return tx.query(
        f"SELECT {COLUMNS} FROM reconciliation_breaks WHERE org_id = ? AND chain_id = ?"
        " AND wallet = ? AND token = ? AND status = ?",
        (org_id, chain_id, wallet, token, OPEN),
    )


def by_number(tx: Transaction, org_id: str, number: int) -> Row | None:
    return tx.one(
        f"SELECT {COLUMNS} FROM reconciliation_breaks WHERE org_id = ? AND number = ?",
        (org_id, number),
    )


def report(
    tx: Transaction,
    *,
    org_id: str,
    kind: Kind,
    chain_id: int,
    wallet: str,
    token: str,
    decimals: int,
    expected: int,
    actual: int,
    difference: int,
    block_number: int,
    evidence: Sequence[str],
    now: str,
) -> tuple[Row, bool]:
    """Open a break of (wallet, token, kind), announced; or, when one is open, bring it
    to what was seen now (never a second one). The break, and whether it was opened."""
    evidence_text = json.dumps(list(dict.fromkeys(evidence)))
    found = tx.one(
        f"SELECT {COLUMNS} FROM reconciliation_breaks WHERE org_id = ? AND chain_id = ?"
        " AND wallet = ? AND token = ? AND kind = ? AND status = ?",
        (org_id, chain_id, wallet, token, kind, OPEN),
    )
    amounts = (str(expected), str(actual), str(difference))
    if found is not None:
        tx.execute(
            "UPDATE reconciliation_breaks SET expected = ?, actual = ?, difference = ?,"
            " block_number = ?, evidence = ? WHERE id = ?",
            (*amounts, max(block_number, int(found["block_number"])), evidence_text, found["id"]),
        )
        row = tx.one(f"SELECT {COLUMNS} FROM reconciliation_breaks WHERE id = ?", (found["id"],))
        assert row is not None
        return row, False
    row = insert_numbered(
        tx,
        "reconciliation_breaks",
        org_id,
        {
            "kind": kind,
            "chain_id": chain_id,
            "wallet": wallet,
            "token": token,
            "decimals": decimals,
            "expected": amounts[0],
            "actual": amounts[1],
            "difference": amounts[2],
            "block_number": block_number,
            "evidence": evidence_text,
            "status": OPEN,
            "opened_at": now,
        },
        COLUMNS,
    )
    assert row is not None
    _announce(tx, row, "reconciliation.break_opened", now)
    return row, True


def resolve(
    tx: Transaction,
    row: Row,
    now: str,
    *,
    note: str | None = None,
    by: dict[str, Any] | None = None,
) -> Row | None:
    """Resolve an open break (a later run tied out, or an admin accepted it: `by` and
    `note`), announced; None when it was resolved already."""
    changed = tx.execute(
        "UPDATE reconciliation_breaks SET status = ?, resolved_at = ?, resolved_by = ?,"
        " note = ? WHERE id = ? AND status = ?",
        (RESOLVED, now, None if by is None else json.dumps(by), note, row["id"], OPEN),
    )
    if not changed:
        return None
    done = tx.one(f"SELECT {COLUMNS} FROM reconciliation_breaks WHERE id = ?", (row["id"],))
    assert done is not None
    _announce(tx, done, "reconciliation.break_resolved", now)
    return done


def _announce(tx: Transaction, row: Row, event: str, now: str) -> None:
    emit(
        tx,
        org_id=str(row["org_id"]),
        event_type=event,
        wallet_address=str(row["wallet"]),
        data=shown(row),
        now=now,
    )


def open_missing_movement(
    tx: Transaction,
    *,
    transfer_id: str,
    chain_id: int,
    block_number: int,
    decimals: Callable[[str], int],
    now: str,
) -> list[Row]:
    """A reorg removed the block of a completed transfer's leg (deeper than the chain's
    confirmations): a ``missing_movement`` break for each (wallet, token) the books moved
    for it on that chain, opened now, before a re-broadcast can hide it. `expected` is
    what the journal holds, `actual` that without the movement. `decimals(token)`: the
    token's decimals. The breaks (none when the books moved nothing for it)."""
    moved: dict[tuple[str, str, str], int] = defaultdict(int)
    hashes: list[str] = []
    for posting in journal.of_transfer(tx, transfer_id):
        address = journal.address_of(str(posting["account"]))
        if address is None or posting["block_number"] is None:
            continue
        if int(str(posting["chain_id"])) != chain_id:
            continue
        moved[(str(posting["org_id"]), address, str(posting["token"]))] += int(
            str(posting["amount"])
        )
        if posting["transaction_hash"]:
            hashes.append(str(posting["transaction_hash"]))
    opened = []
    for (org_id, address, token), amount in sorted(moved.items()):
        if not amount:
            continue
        expected = journal.balance(tx, org_id, chain_id, journal.wallet(address), token)
        row, _ = report(
            tx,
            org_id=org_id,
            kind="missing_movement",
            chain_id=chain_id,
            wallet=address,
            token=token,
            decimals=decimals(token),
            expected=expected,
            actual=expected - amount,
            difference=-amount,
            block_number=block_number,
            evidence=[transfer_id, *hashes],
            now=now,
        )
        opened.append(row)
    return opened
