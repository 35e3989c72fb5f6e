"""The recipients table: one row per saved address, numbered per organization."""

from __future__ import annotations

from collections.abc import Iterator

from .._infra.models import ListQuery
from .._infra.sql import insert_new, order_by
from ..backends.storage.base import DuplicateKey, Row, Transaction
from ..errors import Conflict

COLUMNS = "number AS id, address, label, created_at, updated_at"
_CURRENT = "org_id = ? AND deleted_at IS NULL"


def insert(tx: Transaction, org_id: str, address: str, label: str, now: str) -> Row:
    """A new recipient; 409 if the organization already saved that address."""
    times = dict.fromkeys(("created_at", "updated_at", "pointed_at"), now)
    values = {"address": address, "label": label, **times}
    conflict = "A recipient with this address already exists"
    return insert_new(tx, "recipients", org_id, values, COLUMNS, conflict)


def change(
    tx: Transaction, org_id: str, number: int, address: str | None, label: str | None, now: str
) -> Row | None:
    """Set what is given; the row as shown, None if there is none; 409 on a saved address."""
    try:
        return tx.one(
            "UPDATE recipients SET address = COALESCE(?, address), label = COALESCE(?, label),"
            # re-pointed (another address): known again only after the cooldown
            " pointed_at = CASE WHEN COALESCE(?, address) = address THEN pointed_at ELSE ? END,"
            f" updated_at = ? WHERE {_CURRENT} AND number = ? RETURNING {COLUMNS}",
            (address, label, address, now, now, org_id, number),
        )
    except DuplicateKey:
        raise Conflict("A recipient with this address already exists") from None


def remove(tx: Transaction, org_id: str, number: int, now: str) -> bool:
    """Delete a recipient softly: its number is never given again, its address may be
    saved again."""
    return bool(
        tx.execute(
            f"UPDATE recipients SET deleted_at = ?, updated_at = ? WHERE {_CURRENT} AND number = ?",
            (now, now, org_id, number),
        )
    )


def every(tx: Transaction, org_id: str, query: ListQuery) -> Iterator[list[Row]]:
    """The organization's current recipients in `query`'s order, in chunks."""
    return tx.stream(
        f"SELECT {COLUMNS} FROM recipients WHERE {_CURRENT} " + order_by(query, "number"),
        (org_id,),
    )
