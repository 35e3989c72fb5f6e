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
(`GENESIS` for the first), and `hash`, the HMAC-SHA256 of its own canonical JSON
(`canonical`: the event as listed, without `hash`) under a key derived from the master
key (`audit_key`, purpose "audit"): a database writer without the master key cannot
re-hash a rewritten chain. `audit_heads` holds each organization's last sequence
number, its hash and the hash before it; its row is the lock that serialises the
appends of one organization (an upsert locks it in PostgreSQL; SQLite has one writer),
and it shows a deleted last event. A cut tail with its head moved back, or a whole
chain deleted, is caught by a signed checkpoint kept outside the database
(`treasury.audit.checkpoints`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from ..backends.storage.base import Row, Transaction
from ..errors import TreasuryError
from .crypto import SecretBox
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
    recorded_in: Transaction | None = None  # the transaction that appended its event

    def recorded(self, tx: Transaction | None = None) -> bool:
        """Whether its event is in the database (its transaction committed), or is
        being appended in `tx`."""
        last = self.recorded_in
        return last is not None and (last.committed or last is tx)


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
    if not call.recorded():  # nothing committed with its event (a replay, a read)
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
    if call is None or call.recorded(tx):
        return
    named = call.object_id or (None if result is None else call.identify(result))
    _append_call(tx, call, named, call.status)


def _append_call(tx: Transaction, call: Call, object_id: str | None, status: int) -> None:
    call.recorded_in = tx
    append(
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
    if call.recorded():
        return
    try:
        with call.runtime.storage.transaction() as tx:
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
) -> str:
    """Append one event to `org_id`'s chain in `tx`; its id. The organization's head is
    taken (one upsert that locks it in PostgreSQL and answers its number and hash), the
    event's hash computed here, keyed (`keyed_hash`: HMAC-SHA256 under the audit key,
    which never leaves the process), then the head's move and the event are sent, two
    writes whose answers nobody reads (with the commit where the backend can). Holds the
    organization's head until `tx` ends: make it the transaction's last write."""
    event_id = "aud_" + secrets.token_hex(12)
    at, who = runtime.now_text(), actor.as_json()
    before, after = _around_previous(
        {
            "id": event_id,
            "at": at,
            "actor": who,
            "operation": operation,
            "objectType": object_type,
            "objectId": object_id,
            "status": status,
            "requestId": request_id,
            "prevHash": "",
        }
    )
    head = tx.one(_TAKE_HEAD, (org_id, GENESIS))
    assert head is not None
    seq, previous = int(head["seq"]) + 1, str(head["hash"])
    digest = keyed_hash(audit_key(runtime.secrets), before + previous + after)
    tx.send(_ADVANCE_HEAD, (seq, previous, digest, org_id))
    tx.send(
        _COPY_EVENT,
        (
            org_id,
            seq,
            event_id,
            at,
            _CANONICAL.encode(who),
            operation,
            object_type,
            object_id,
            status,
            request_id,
            previous,
            digest,
        ),
    )
    return event_id


#: The organization's head, created at #0 for its first event, locked and read.
_TAKE_HEAD = (
    "INSERT INTO audit_heads (org_id, seq, prev_hash, hash) VALUES (?, 0, NULL, ?)"
    " ON CONFLICT (org_id) DO UPDATE SET seq = audit_heads.seq RETURNING seq, hash"
)
#: The head moves to the new event: its number, previous hash and hash.
_ADVANCE_HEAD = "UPDATE audit_heads SET seq = ?, prev_hash = ?, hash = ? WHERE org_id = ?"
#: The event, numbered and chained as its head now says.
_COPY_EVENT = (
    "INSERT INTO audit_events (org_id, seq, id, at, actor, operation, object_type,"
    " object_id, status, request_id, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: The purpose the audit chain's key is derived for from the master key.
AUDIT_PURPOSE = "audit"


def audit_key(box: SecretBox) -> bytes:
    """The key of every chain's HMAC, derived from the master key (purpose "audit")."""
    return box.derive(AUDIT_PURPOSE)


def keyed_hash(key: bytes, text: str) -> str:
    """HMAC-SHA256 (hex) of `text`'s UTF-8 under `key`: an event's hash."""
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


_PREVIOUS = '"prevHash":""'


def _around_previous(event: dict[str, Any]) -> tuple[str, str]:
    """An event's canonical JSON (`event`, without `hash`, its `prevHash` empty) before
    and after its previous hash's value (the text between the quotes of
    ``"prevHash":"…"``). A value cannot hold ``"prevHash":""`` unescaped, so the split is
    at the field itself."""
    before, found, after = _CANONICAL.encode(event).partition(_PREVIOUS)
    assert found
    return before + _PREVIOUS[:-1], _PREVIOUS[-1] + after


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


#: Canonical JSON: keys sorted, no spaces, text as it is (UTF-8 once encoded).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_text(event: dict[str, Any]) -> str:
    """An event's canonical JSON: every field but `hash`, keys sorted, no spaces."""
    return _CANONICAL.encode({key: value for key, value in event.items() if key != "hash"})


def canonical(event: dict[str, Any]) -> bytes:
    """`canonical_text` in UTF-8: what an event's hash is the SHA-256 of."""
    return canonical_text(event).encode()


def hash_of(event: dict[str, Any], key: bytes) -> str:
    """The HMAC-SHA256 (hex) of an event's canonical JSON under the audit key: what its
    `hash` must be."""
    return hmac.new(key, canonical(event), hashlib.sha256).hexdigest()


def plain_hash_of(event: dict[str, Any]) -> str:
    """The SHA-256 of an event's canonical JSON: its hash before the chain was keyed
    (migration 20), which `rekey` checks before re-hashing a chain with the key."""
    return hashlib.sha256(canonical(event)).hexdigest()


def rekey(tx: Transaction, key: bytes) -> int:
    """Key every chain that still holds under plain SHA-256 (the chains written before
    migration 20): each event re-hashed with `hash_of`, in order, and its head moved
    along; a chain already broken is left as it is (`verify` keeps naming its break).
    Run once, in migration 20's transaction. The number of events re-hashed."""
    done = 0
    heads = tx.query("SELECT org_id, seq, hash FROM audit_heads ORDER BY org_id")
    for head in heads:
        rows = tx.query(
            "SELECT org_id, seq, id, at, actor, operation, object_type, object_id, status,"
            " request_id, prev_hash, hash FROM audit_events WHERE org_id = ? ORDER BY seq",
            (head["org_id"],),
        )
        last, seq, intact = GENESIS, 0, True
        for row in rows:
            event = event_of(row)
            if (
                row["seq"] != seq + 1
                or row["prev_hash"] != last
                or plain_hash_of(event) != row["hash"]
            ):
                intact = False
                break
            seq, last = row["seq"], row["hash"]
        if not intact or (head["seq"], head["hash"]) != (seq, last):
            log.warning("audit chain of %s is broken: left unkeyed", head["org_id"])
            continue
        previous = GENESIS
        for row in rows:
            event = {**event_of(row), "prevHash": previous}
            digest = hash_of(event, key)
            tx.execute(
                "UPDATE audit_events SET prev_hash = ?, hash = ? WHERE org_id = ? AND seq = ?",
                (previous, digest, row["org_id"], row["seq"]),
            )
            before, previous = previous, digest
            done += 1
        if rows:
            tx.execute(
                "UPDATE audit_heads SET prev_hash = ?, hash = ? WHERE org_id = ?",
                (before, previous, head["org_id"]),
            )
    return done
