"""The durable event outbox: events are written in the transaction that causes them."""

from __future__ import annotations

import json
from typing import Any

from ..backends.storage.base import Transaction


def emit(
    tx: Transaction,
    *,
    org_id: str,
    event_type: str,
    wallet_address: str | None,
    data: dict[str, Any],
    now: str,
) -> int:
    """Append an event to the outbox, from which webhook delivery will read."""
    payload = {"type": event_type, "timestamp": now.replace("+00:00", "Z"), "data": data}
    row = tx.one(
        "INSERT INTO events (org_id, type, wallet_address, payload, created_at)"
        " VALUES (?, ?, ?, ?, ?) RETURNING id",
        (org_id, event_type, wallet_address, json.dumps(payload), now),
    )
    assert row is not None
    return int(row["id"])
