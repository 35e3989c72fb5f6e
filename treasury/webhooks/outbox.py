"""The durable event outbox: events are written in the transaction that causes them, with
their webhook deliveries (one per matching webhook), so none is lost or made twice.

A payload is ``{"type", "event", "timestamp", "data"}``: `event` repeats `type` for
receivers written for the original service (they read ``payload.event``). A payload that
carries secrets (an on-ramp's deposit instructions) is stored sealed (`SEALED`) and
opened only to be sent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._infra.crypto import SecretBox
from ..backends.storage.base import Transaction
from .deliveries import fan_out

#: The purpose under which sealed payloads are encrypted at rest.
SEALED = "webhook-payload"


def emit(
    tx: Transaction,
    *,
    org_id: str,
    event_type: str,
    wallet_address: str | Sequence[str] | None,
    data: dict[str, Any],
    now: str,
    box: SecretBox | None = None,
) -> int:
    """Append an event to the outbox and write its deliveries. `wallet_address` is the
    address (or the addresses, e.g. both sides of a transfer) a webhook's `wallets`
    filter matches; `box`, when given, seals the payload at rest."""
    payload = {
        "type": event_type,
        "event": event_type,
        "timestamp": now.replace("+00:00", "Z"),
        "data": data,
    }
    text = json.dumps(payload)
    if box is not None:
        text = box.seal(SEALED, text)
    wallets = (
        []
        if wallet_address is None
        else ([wallet_address] if isinstance(wallet_address, str) else list(wallet_address))
    )
    row = tx.one(
        "INSERT INTO events (org_id, type, wallet_address, payload, created_at)"
        " VALUES (?, ?, ?, ?, ?) RETURNING id",
        (org_id, event_type, ",".join(wallets) or None, text, now),
    )
    assert row is not None
    event_id = int(row["id"])
    fan_out(
        tx,
        org_id=org_id,
        event_id=event_id,
        event_type=event_type,
        wallets=wallets,
        now=now,
    )
    return event_id


def opened(box: SecretBox, payload: str) -> str:
    """A stored payload as it is sent (sealed ones opened)."""
    return box.unseal(SEALED, payload)
