"""The durable event outbox: events are written in the transaction that causes them, with
their webhook deliveries (one per matching webhook), so none is lost or made twice."""

from __future__ import annotations

import json
from typing import Any

from ..backends.storage.base import Transaction
from .deliveries import fan_out


def emit(
    tx: Transaction,
    *,
    org_id: str,
    event_type: str,
    wallet_address: str | None,
    data: dict[str, Any],
    now: str,
) -> int:
    """Append an event to the outbox and write its deliveries."""
    payload = {"type": event_type, "timestamp": now.replace("+00:00", "Z"), "data": data}
    row = tx.one(
        "INSERT INTO events (org_id, type, wallet_address, payload, created_at)"
        " VALUES (?, ?, ?, ?, ?) RETURNING id",
        (org_id, event_type, wallet_address, json.dumps(payload), now),
    )
    assert row is not None
    event_id = int(row["id"])
    fan_out(
        tx,
        org_id=org_id,
        event_id=event_id,
        event_type=event_type,
        wallet_address=wallet_address,
        now=now,
    )
    return event_id
