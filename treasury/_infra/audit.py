"""The audit log: one event per call of an operation that changes state and per admin
action, appended to its organization's hash chain in the transaction of the change.

How a call is recorded (the organization's handle runs every call through `run`):

* `run` opens the call's `Call` (actor, operation, object type, success status, request
  id) in a context variable, then calls the operation.
* The transaction that commits the call's change calls `record` as its last statement
  (`idempotency` does for every creation, the domains for their updates and deletes):
  the event is appended there, so it commits or rolls back with the change.
* A call that committed nothing of its own (an idempotent replay, a prepare, the faucet)
  is recorded by `run` after it, in its own transaction; so is a refused call (status
  >= 400, without `objectId`), since its change rolled back.

The chain: each event stores `prev_hash`, the hash of its organization's previous event
(`GENESIS` for the first), and `hash`, the SHA-256 of its own canonical JSON (`canonical`:
the event as listed, without `hash`). `audit_heads` holds each organization's last
sequence number and hash; its row is the lock that serialises the appends of one
organization (an upsert locks it in PostgreSQL; SQLite has one writer), and it shows a
deleted last event.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from ..backends.storage.base import Row, Transaction
from ..errors import TreasuryError
from .runtime import Runtime

log = logging.getLogger("treasury.audit")

GENESIS = "0" * 64
T = TypeVar("T")


@dataclass(frozen=True)
class Actor:
    """Who acted: an API key and its user, or (neither) the operator (`ADMIN`)."""

    api_key_id: str | None = None
    user_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        if self.api_key_id is None:
            return {"admin": True}
        return {"apiKeyId": self.api_key_id, "userId": self.user_id}


ADMIN = Actor()


@dataclass
class Call:
    """One call of an operation that changes state, while it runs."""

    runtime: Runtime
    org_id: str
    actor: Actor
    operation: str
    object_type: str
    status: int  # the operation's success status
    request_id: str | None = None
    object_id: str | None = None  # named by the call (a path parameter), if it names one
    #: Else its object's id, read from the call's result.
    identify: Callable[[Any], str | None] = lambda result: None
    event_id: str | None = None  # once its event is appended
    event_seq: int | None = None  # its number in the organization's chain


_current: ContextVar[Call | None] = ContextVar("treasury_audit_call", default=None)


def run(call: Call, action: Callable[[], T]) -> T:
    """Run `action` as `call`: recorded once, in the transaction of its change (`record`)
    or else after it, in its own; refused (an exception), recorded without object. A call
    inside another (the HTTP layer's around the handle's) is the outer one's."""
    if _current.get() is not None:
        return action()
    token = _current.set(call)
    try:
        result = action()
    except Exception as error:
        _current.reset(token)
        _refused(call, error)
        raise
    except BaseException:
        _current.reset(token)
        raise
    _current.reset(token)
    if call.event_id is None:
        with call.runtime.storage.transaction() as tx:
            _append_call(tx, call, call.object_id or call.identify(result), call.status)
    return result


def within(action: Callable[[], T]) -> T:
    """Run `action` as part of the running call (the method a request runs): its result
    names the call's object, if nothing named it before."""
    result = action()
    call = _current.get()
    if call is not None and call.object_id is None:
        call.object_id = call.identify(result)
    return result


def running() -> bool:
    """Whether an audited call is running in this context."""
    return _current.get() is not None


def record(tx: Transaction, result: Any = None) -> None:
    """Append the running call's event in `tx`, the transaction that commits its change
    (its last statement; `result`: what the call will answer, when it names the object);
    nothing outside a call, or once its event is appended."""
    call = _current.get()
    if call is None or call.event_id is not None:
        return
    named = call.object_id or (None if result is None else call.identify(result))
    _append_call(tx, call, named, call.status)


def _append_call(tx: Transaction, call: Call, object_id: str | None, status: int) -> None:
    call.event_id, call.event_seq = append(
        tx,
        call.runtime,
        call.org_id,
        actor=call.actor,
        operation=call.operation,
        object_type=call.object_type,
        object_id=object_id,
        status=status,
        request_id=call.request_id,
    )


def _refused(call: Call, error: Exception) -> None:
    """Record a refused call in its own transaction, unless its event committed before
    the refusal (a change made, then a failure after it). Never hides `error`."""
    status = error.status if isinstance(error, TreasuryError) else 500
    storage = call.runtime.storage
    try:
        if call.event_id is not None and storage.read_one(
            "SELECT 1 AS found FROM audit_events WHERE org_id = ? AND seq = ? AND id = ?",
            (call.org_id, call.event_seq, call.event_id),
        ):
            return
        with storage.transaction() as tx:
            _append_call(tx, call, None, status)
    except Exception:
        log.exception("could not record the refused call %s", call.operation)


def append(
    tx: Transaction,
    runtime: Runtime,
    org_id: str,
    *,
    actor: Actor,
    operation: str,
    object_type: str,
    object_id: str | None,
    status: int,
    request_id: str | None = None,
) -> tuple[str, int]:
    """Append one event to `org_id`'s chain in `tx`; its id and number. Holds the organization's
    head (locked in PostgreSQL) until `tx` ends: make it the transaction's last write."""
    head = tx.one(
        "INSERT INTO audit_heads (org_id, seq, hash) VALUES (?, 1, ?)"
        " ON CONFLICT (org_id) DO UPDATE SET seq = audit_heads.seq + 1 RETURNING seq, hash",
        (org_id, GENESIS),
    )
    assert head is not None
    event = {
        "id": "aud_" + secrets.token_hex(12),
        "at": runtime.now_text(),
        "actor": actor.as_json(),
        "operation": operation,
        "objectType": object_type,
        "objectId": object_id,
        "status": status,
        "requestId": request_id,
        "prevHash": head["hash"],
    }
    digest = hash_of(event)
    tx.execute(
        "INSERT INTO audit_events (org_id, seq, id, at, actor, operation, object_type,"
        " object_id, status, request_id, prev_hash, hash)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            org_id,
            head["seq"],
            event["id"],
            event["at"],
            json.dumps(event["actor"], sort_keys=True, separators=(",", ":")),
            operation,
            object_type,
            object_id,
            status,
            request_id,
            head["hash"],
            digest,
        ),
    )
    tx.execute("UPDATE audit_heads SET hash = ? WHERE org_id = ?", (digest, org_id))
    return str(event["id"]), int(head["seq"])


def event_of(row: Row) -> dict[str, Any]:
    """An event as listed, from its stored row: its canonical fields and its `hash`."""
    return {
        "id": row["id"],
        "at": row["at"],
        "actor": json.loads(row["actor"]),
        "operation": row["operation"],
        "objectType": row["object_type"],
        "objectId": row["object_id"],
        "status": row["status"],
        "requestId": row["request_id"],
        "prevHash": row["prev_hash"],
        "hash": row["hash"],
    }


def canonical(event: dict[str, Any]) -> bytes:
    """An event's canonical JSON: every field but `hash`, keys sorted, no spaces, UTF-8."""
    fields = {key: value for key, value in event.items() if key != "hash"}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def hash_of(event: dict[str, Any]) -> str:
    """The SHA-256 (hex) of an event's canonical JSON: what its `hash` must be."""
    return hashlib.sha256(canonical(event)).hexdigest()
