"""The durable event outbox: events are written in the transaction that causes them, with
their webhook deliveries (one per matching webhook), so none is lost or made twice. Every
domain emits; the webhooks domain delivers (`webhooks.dispatcher`).

A payload is ``{"type", "event", "timestamp", "data"}``: `event` repeats `type` for
receivers written for the original service (they read ``payload.event``). A payload that
carries secrets (an on-ramp's deposit instructions) is stored sealed (`SEALED`) and
opened only to be sent.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

from .._infra.crypto import SecretBox
from ..backends.storage.base import Transaction

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


def fan_out(
    tx: Transaction,
    *,
    org_id: str,
    event_id: int,
    event_type: str,
    wallets: Sequence[str],
    now: str,
) -> int:
    """Write the deliveries of a new event: one per active webhook of its organization
    subscribed to its type whose wallet filter, if any, names one of its `wallets`."""
    hooks = tx.query(
        "SELECT id, events, wallets FROM webhooks"
        " WHERE org_id = ? AND active = 1 AND deleted_at IS NULL",
        (org_id,),
    )
    mine = {wallet.lower() for wallet in wallets}
    made = 0
    for hook in hooks:
        if event_type not in json.loads(hook["events"]):
            continue
        if hook["wallets"] is not None and not mine & {
            w.lower() for w in json.loads(hook["wallets"])
        }:
            continue
        tx.execute(
            "INSERT INTO webhook_deliveries (org_id, webhook_id, event_id, message_id,"
            " event_type, status, attempts, next_attempt_at, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?)",
            (org_id, hook["id"], event_id, _message_id(), event_type, now, now, now),
        )
        made += 1
    return made


def _message_id() -> str:
    return "msg_" + secrets.token_hex(16)
