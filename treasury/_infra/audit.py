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
  >= 400, `refused`: naming the object its path names, if any), since its change rolled
  back. A front end records its refusals that never reach `run` (a request past its
  key's rate limit, a body too large) and refused reads with `refused` too.

The chain: each event stores `prev_hash`, the hash of its organization's previous event
(`GENESIS` for the first), and `hash` = SHA-256 of its keyed tag followed by `prev_hash`
(`chained`), the tag being the HMAC-SHA256 of the event's canonical JSON without
`prevHash` and `hash` under a key derived from the master key (`audit_key`, purpose
"audit"). The tag is never stored: a database writer without the master key can neither
alter an event nor chain one after another predecessor (deleted or reordered before it),
as either needs the tag. Events of the first keyed chains (HMAC of the canonical JSON
with `prevHash`, `first_keyed_hash_of`) verify too. `audit_heads` holds each
organization's last sequence number, its hash and the hash before it, and shows a
deleted last event. A cut tail with its head moved back, or a whole chain deleted, is
caught by a signed checkpoint kept outside the database (`treasury.audit.checkpoints`).

Where the chain is written (see docs/decisions.md): with one writer at a time (SQLite)
`append` chains the event in the change's transaction, the process computing the tag and
the database the hash while it advances the head. Where writers run at once
(PostgreSQL) a head every write of the organization locked until its commit made them
wait on each other, so `append` stores the event outside the chain (`audit_pending`),
still in the change's transaction, and `seal` chains the pending events later, in the
order it finds them committed: each worker's pass (`seal_audit_events`), and `verify`,
a checkpoint and a listing before they read. Until sealed, an event is not covered by
the chain.
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

from ..backends.storage.base import Row, Storage, Transaction
from ..errors import TreasuryError
from .crypto import SecretBox
from .jobs import Report
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
        refused(call, error)
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


def refused(call: Call, error: Exception) -> None:
    """Record a refused call (status: `error`'s, 500 for what is not a `TreasuryError`)
    in its own transaction, naming the object its path named (`Call.object_id`), unless
    its event committed before the refusal (a change made, then a failure after it).
    Never hides `error`: a failure to record is logged."""
    status = error.status if isinstance(error, TreasuryError) else 500
    if call.recorded():
        return
    try:
        with call.runtime.storage.transaction() as tx:
            _append_call(tx, call, call.object_id, status)
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
    """Append one event to `org_id`'s chain in `tx`; its id. Where writers run at once
    (PostgreSQL, `Transaction.concurrent`) the event is stored outside the chain, one
    write nobody waits for and nothing shared with the organization's other writers;
    `seal` chains it later, in the order such events are found committed. Elsewhere
    (SQLite, one writer at a time) it is chained here: two writes whose answers nobody
    reads, the head advancing (its new hash computed by the database from the previous
    one and the event's keyed tag, `chained`: ``sha256_hex(tag || previous hash)``; the
    tag, an HMAC-SHA256 of the event's content under the audit key, is computed here
    and the key never leaves the process), then the event copied from it; the head
    stays held until `tx` ends: make it the transaction's last write."""
    event_id = "aud_" + secrets.token_hex(12)
    at, who = runtime.now_text(), _CANONICAL.encode(actor.as_json())
    fields = (event_id, at, who, operation, object_type, object_id, status, request_id, org_id)
    if tx.concurrent:
        tx.send(_PEND, fields)
        return event_id
    tag = _tag(
        audit_key(runtime.secrets), _content(dict(zip(_PENDING_FIELDS, fields, strict=True)))
    )
    tx.send(_ADVANCE_HEAD, (org_id, GENESIS, chained(tag, GENESIS), tag))
    tx.send(_COPY_EVENT, fields)
    return event_id


_PENDING_FIELDS = (
    "id",
    "at",
    "actor",
    "operation",
    "object_type",
    "object_id",
    "status",
    "request_id",
    "org_id",
)
#: An event committed with its change, outside its organization's chain until sealed.
_PEND = (
    f"INSERT INTO audit_pending ({', '.join(_PENDING_FIELDS)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _content(row: Row) -> dict[str, Any]:
    """An event's content as its tag covers it (every field but `prevHash` and `hash`),
    from its stored row (the actor as stored: canonical JSON)."""
    return {
        "id": row["id"],
        "at": row["at"],
        "actor": json.loads(row["actor"]),
        "operation": row["operation"],
        "objectType": row["object_type"],
        "objectId": row["object_id"],
        "status": row["status"],
        "requestId": row["request_id"],
    }


def seal(storage: Storage, key: bytes, org_id: str | None = None, limit: int = 1000) -> int:
    """Chain the pending events (`append` where writers run at once) into their
    organizations' chains (or only `org_id`'s), each organization's oldest first, in
    transactions of at most `limit` events an organization, until none is left; the
    number sealed. Each organization is sealed under a lock of its own, so sealers
    (every worker's job, `verify`, a checkpoint, a listing) take turns and never chain
    one event twice; an event still uncommitted when a sealer reads is not seen, and is
    sealed after the ones sealed then (the chain's order is the order of sealing).
    Nothing to do on SQLite, whose appends chain at once."""
    which, args = ("", ()) if org_id is None else (" WHERE org_id = ?", (org_id,))
    sealed = 0
    while True:
        with storage.read() as tx:  # (SQLite's writer lock is not taken for nothing)
            orgs = tx.query(
                f"SELECT DISTINCT org_id FROM audit_pending{which} ORDER BY org_id", args
            )
        if not orgs:
            return sealed
        with storage.transaction() as tx:  # locks taken in one order: no deadlock
            done = sum(_seal(tx, key, row["org_id"], limit) for row in orgs)
        if not done:  # another sealer took them meanwhile
            return sealed
        sealed += done


def _seal(tx: Transaction, key: bytes, org_id: str, limit: int) -> int:
    tx.lock(f"audit:{org_id}")
    rows = tx.query(
        f"SELECT n, {', '.join(_PENDING_FIELDS)} FROM audit_pending WHERE org_id = ?"
        " ORDER BY n LIMIT ?",
        (org_id, limit),
    )
    if not rows:
        return 0
    head = tx.one("SELECT seq, hash FROM audit_heads WHERE org_id = ?", (org_id,))
    seq, last = (head["seq"], head["hash"]) if head is not None else (0, GENESIS)
    previous = last
    for row in rows:
        seq, previous, last = seq + 1, last, chained(_tag(key, _content(row)), last)
        tx.send(
            _SEALED_EVENT,
            (*(row[name] for name in _PENDING_FIELDS), seq, previous, last),
        )
        tx.send("DELETE FROM audit_pending WHERE n = ?", (row["n"],))
    tx.send(_SET_HEAD, (org_id, seq, previous, last))
    return len(rows)


_SEALED_EVENT = (
    f"INSERT INTO audit_events ({', '.join(_PENDING_FIELDS)}, seq, prev_hash, hash)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SET_HEAD = (
    "INSERT INTO audit_heads (org_id, seq, prev_hash, hash) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (org_id) DO UPDATE SET seq = excluded.seq, prev_hash = excluded.prev_hash,"
    " hash = excluded.hash"
)


def seal_pending(runtime: Runtime, org_id: str | None = None) -> int:
    """`seal` under the runtime's audit key: what a reader of the chain does first
    (`verify`, a checkpoint, a listing), and what the workers' job does."""
    return seal(runtime.storage, audit_key(runtime.secrets), org_id)


def seal_audit_events(runtime: Runtime, report: Report) -> None:
    """Job: seal the pending audit events into their chains (`seal`)."""
    report.add(audit_events_sealed=seal_pending(runtime))


#: The organization's head moves to the next event: number, previous hash and hash
#: (the first event's computed here, every later one by the database).
_ADVANCE_HEAD = (
    "INSERT INTO audit_heads (org_id, seq, prev_hash, hash) VALUES (?, 1, ?, ?)"
    " ON CONFLICT (org_id) DO UPDATE SET seq = audit_heads.seq + 1,"
    " prev_hash = audit_heads.hash, hash = sha256_hex(? || audit_heads.hash)"
)
#: The event, numbered and chained as its head now says.
_COPY_EVENT = (
    "INSERT INTO audit_events (org_id, seq, id, at, actor, operation, object_type,"
    " object_id, status, request_id, prev_hash, hash)"
    " SELECT org_id, seq, ?, ?, ?, ?, ?, ?, ?, ?, prev_hash, hash FROM audit_heads"
    " WHERE org_id = ?"
)
#: The purpose the audit chain's key is derived for from the master key.
AUDIT_PURPOSE = "audit"


def audit_key(box: SecretBox) -> bytes:
    """The key of every chain's HMAC, derived from the master key (purpose "audit")."""
    return box.derive(AUDIT_PURPOSE)


def _tag(key: bytes, content: dict[str, Any]) -> str:
    """The keyed tag of an event's content (every field but `prevHash` and `hash`):
    HMAC-SHA256 (hex) of its canonical JSON under the audit key."""
    return hmac.new(key, _CANONICAL.encode(content).encode(), hashlib.sha256).hexdigest()


def chained(tag: str, previous: str) -> str:
    """An event's hash from its keyed tag and its predecessor's hash: the SHA-256 (hex)
    of the two hex texts, tag first. What the database computes (``sha256_hex``) when
    it advances the head."""
    return hashlib.sha256((tag + previous).encode()).hexdigest()


def event_of(row: Row) -> dict[str, Any]:
    """An event as listed, from its stored row: its canonical fields and its `hash`."""
    return {**_content(row), "prevHash": row["prev_hash"], "hash": row["hash"]}


#: Canonical JSON: keys sorted, no spaces, text as it is (UTF-8 once encoded).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_text(event: dict[str, Any]) -> str:
    """An event's canonical JSON: every field but `hash`, keys sorted, no spaces."""
    return _CANONICAL.encode({key: value for key, value in event.items() if key != "hash"})


def canonical(event: dict[str, Any]) -> bytes:
    """`canonical_text` in UTF-8: what an event's hash is the SHA-256 of."""
    return canonical_text(event).encode()


def hash_of(event: dict[str, Any], key: bytes) -> str:
    """What an event's `hash` must be: `chained` of its keyed tag (HMAC-SHA256 under the
    audit key of its canonical JSON without `prevHash` and `hash`) and its `prevHash`."""
    content = {name: value for name, value in event.items() if name not in _LINKS}
    return chained(_tag(key, content), event["prevHash"])


def first_keyed_hash_of(event: dict[str, Any], key: bytes) -> str:
    """The HMAC-SHA256 (hex) under the audit key of an event's canonical JSON, its
    `prevHash` included: how the first keyed chains were hashed (migration 20, before
    the tag was chained in the database), which `verify` still accepts for such events."""
    return hmac.new(key, canonical(event), hashlib.sha256).hexdigest()


_LINKS = ("prevHash", "hash")


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
