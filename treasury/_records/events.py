"""The durable event outbox: events are written in the transaction that causes them, with
their webhook deliveries (one per matching webhook), so none is lost or made twice. Every
domain emits; the webhooks domain delivers (`webhooks.dispatcher`).

A payload is ``{"type", "event", "timestamp", "sequence", "data"}``: `event` repeats
`type` for receivers written for the original service (they read ``payload.event``).
`sequence` grows with each event of the organization in the order the changes were
committed: it is taken from the organization's counter (`event_sequences`), whose row
stays locked until the emitting transaction ends, so a later number is never committed
before an earlier one. Each event names the object it is about (`object_key`: a
transfer's id, a transaction's hash, a deposit's log), and the dispatcher sends the first
attempts of one object's events to one webhook in sequence order, one after the other
(`webhooks.deliveries.lease_due`). A payload that carries secrets (an on-ramp's deposit
instructions) is stored sealed (`SEALED`) and opened only to be sent.
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
    object_key: str | None = None,
) -> int:
    """Append an event to the outbox and write its deliveries. `wallet_address` is the
    address (or the addresses, e.g. both sides of a transfer) a webhook's `wallets`
    filter matches; `box`, when given, seals the payload at rest; `object_key` names
    what the event is about, whose events reach each webhook in order (by default read
    from the event: `object_of`)."""
    sequence = next_sequence(tx, org_id)
    payload = {
        "type": event_type,
        "event": event_type,
        "timestamp": now.replace("+00:00", "Z"),
        "sequence": sequence,
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
        "INSERT INTO events (org_id, type, wallet_address, payload, created_at, sequence)"
        " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (org_id, event_type, ",".join(wallets) or None, text, now, sequence),
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
        sequence=sequence,
        object_key=object_key if object_key is not None else object_of(event_type, data),
    )
    return event_id


def next_sequence(tx: Transaction, org_id: str) -> int:
    """The organization's next event number. The counter's row stays locked by `tx`
    until it ends, so numbers are committed in the order they are taken."""
    row = tx.one(
        "INSERT INTO event_sequences (org_id, last) VALUES (?, 1)"
        " ON CONFLICT (org_id) DO UPDATE SET last = event_sequences.last + 1 RETURNING last",
        (org_id,),
    )
    assert row is not None
    return int(row["last"])


def object_of(event_type: str, data: dict[str, Any]) -> str | None:
    """What an event is about, by its type's family: a transfer (its id), a tracked
    transaction (its hash), a deposit (its chain, hash and log index); None: nothing to
    order it with."""
    family = event_type.partition(".")[0]
    if family == "transfer" and data.get("id"):
        return f"transfer:{data['id']}"
    if family == "transaction" and data.get("hash"):
        return f"transaction:{data.get('chainId', '')}:{str(data['hash']).lower()}"
    if family == "deposit" and data.get("transactionHash"):
        found = (
            data.get("chainId", ""),
            str(data["transactionHash"]).lower(),
            data.get("logIndex"),
        )
        return "deposit:{}:{}:{}".format(*found)
    return None


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
    sequence: int | None = None,
    object_key: str | None = None,
) -> int:
    """Write the deliveries of a new event: one per active webhook of its organization
    subscribed to its type whose wallet filter, if any, names one of its `wallets`
    (with the event's `sequence` and `object_key`, which order first attempts)."""
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
            " event_type, status, attempts, next_attempt_at, created_at, updated_at,"
            " sequence, object_key) VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?, ?)",
            (
                org_id,
                hook["id"],
                event_id,
                _message_id(),
                event_type,
                now,
                now,
                now,
                event_id if sequence is None else sequence,
                object_key,
            ),
        )
        made += 1
    return made


def _message_id() -> str:
    return "msg_" + secrets.token_hex(16)
