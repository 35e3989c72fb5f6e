"""The webhooks table: registered targets, numbered per organization, deleted softly."""

from __future__ import annotations

import json

from .._infra.sql import insert_numbered
from ..backends.storage.base import Row, Transaction

COLUMNS = "number AS id, url, events, wallets, active, created_at"
_CURRENT = "org_id = ? AND deleted_at IS NULL"


def insert(
    tx: Transaction,
    org_id: str,
    *,
    url: str,
    events: list[str],
    wallets: list[str] | None,
    sealed_secret: bytes,
    now: str,
) -> Row:
    values = {
        "url": url,
        "events": json.dumps(events),
        "wallets": None if wallets is None else json.dumps(wallets),
        "secret": sealed_secret,
        "active": 1,
        "created_at": now,
    }
    row = insert_numbered(tx, "webhooks", org_id, values, COLUMNS)
    assert row is not None
    return _decoded(row)


def current(tx: Transaction, org_id: str) -> list[Row]:
    rows = tx.query(f"SELECT {COLUMNS} FROM webhooks WHERE {_CURRENT} ORDER BY number", (org_id,))
    return [_decoded(row) for row in rows]


def remove(tx: Transaction, org_id: str, number: int, now: str) -> bool:
    return bool(
        tx.execute(
            f"UPDATE webhooks SET deleted_at = ?, active = 0 WHERE {_CURRENT} AND number = ?",
            (now, org_id, number),
        )
    )


def _decoded(row: Row) -> Row:
    wallets = row["wallets"]
    return row | {
        "events": json.loads(row["events"]),
        "wallets": None if wallets is None else json.loads(wallets),
        "active": bool(row["active"]),
    }


def internal_id(tx: Transaction, org_id: str, number: int) -> int | None:
    """The row id of a current webhook of the organization, by its number."""
    row = tx.one(f"SELECT id FROM webhooks WHERE {_CURRENT} AND number = ?", (org_id, number))
    return None if row is None else int(row["id"])
