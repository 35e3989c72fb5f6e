"""Idempotency keys (draft-ietf-httpapi-idempotency-key-header, Stripe semantics).

The operation runs and its outcome is stored under the key in one storage transaction.
If the key already holds a live outcome, the insert finds it, the transaction rolls back
(the operation's writes with it) and the stored outcome is replayed: the operation's
effects in the database happen at most once, and the common path costs one extra
statement. (Local custody writes its new key in the same transaction, so a replayed
wallet creation leaves no key behind.) Concurrent
requests with one key queue on the database's write lock or on the key's unique index.
A stored 4xx is written after its operation rolled back. Operations with effects
outside the database will claim their key in a committed transaction first.
Scope is (organization, key); the fingerprint is method, path and canonical body.
Only successes and 4xx business errors (404, 409, ...) are stored. Outcomes that must
stay retryable are not: 400, 401, 429 and every 5xx (the whole transaction rolls back,
claim included).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from pydantic import BaseModel

from ._clock import to_text
from ._runtime import Scope
from .backends.storage.base import Row, Transaction
from .errors import (
    IdempotencyInFlight,
    IdempotencyKeyReused,
    TreasuryError,
    ValidationError,
)
from .models.common import Resource

KEY_TTL = timedelta(hours=24)
NOT_STORED = frozenset({400, 401, 429})  # and every status >= 500
MAX_KEY_LENGTH = 256

R = TypeVar("R", bound=Resource)


def fingerprint(method: str, path: str, body: BaseModel) -> str:
    """SHA-256 of method, path and the validated body's JSON (fields in model order)."""
    canonical = body.model_dump_json(exclude_none=True, by_alias=True)
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


def check_key(key: str) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValidationError.field(
            "header", "Idempotency-Key", f"must be a string of 1 to {MAX_KEY_LENGTH} characters"
        )
    return key


def run_once(
    scope: Scope,
    key: str | None,
    request: tuple[str, str, BaseModel],
    operation: Callable[[Transaction], R],
    result_type: type[R],
    status: int = 201,
) -> R:
    """Run `operation` at most once per (organization, key); replay its stored outcome."""
    storage = scope.runtime.storage
    if key is None:
        with storage.transaction() as tx:
            return operation(tx)
    check_key(key)
    print_ = fingerprint(*request)
    now = scope.runtime.now()
    try:
        with storage.transaction() as tx:
            result = operation(tx)
            if not _store(tx, scope.org_id, key, print_, now, status, result.model_dump_json()):
                raise _Taken()  # rolls the operation back
        return result
    except _Taken:
        pass
    except TreasuryError as error:
        if error.status in NOT_STORED or error.status >= 500:
            raise
        with storage.transaction() as tx:  # the operation rolled back; keep its answer
            body = json.dumps(error.to_body())
            stored_now = _store(tx, scope.org_id, key, print_, now, error.status, body)
        if stored_now:
            raise
    with storage.read() as tx:
        stored = tx.one(_SELECT, (scope.org_id, key, to_text(now)))
    if stored is None:  # stored and expired within this call: vanishingly rare
        raise IdempotencyInFlight()
    return _replay(stored, print_, result_type)


_SELECT = (
    "SELECT fingerprint, state, status, body FROM idempotency_keys"
    " WHERE org_id = ? AND key = ? AND expires_at > ?"
)


class _Taken(Exception):
    """The key already holds a live outcome: undo this run and replay that one."""


def _store(
    tx: Transaction,
    org_id: str,
    key: str,
    print_: str,
    now: datetime,
    status: int,
    body: str,
) -> bool:
    """Record an outcome, taking over an expired key; False if a live one is there."""
    return bool(
        tx.execute(
            "INSERT INTO idempotency_keys"
            " (org_id, key, fingerprint, state, status, body, created_at, expires_at)"
            " VALUES (?, ?, ?, 'done', ?, ?, ?, ?) ON CONFLICT (org_id, key) DO UPDATE SET"
            " fingerprint = excluded.fingerprint, state = excluded.state,"
            " status = excluded.status, body = excluded.body,"
            " created_at = excluded.created_at, expires_at = excluded.expires_at"
            " WHERE idempotency_keys.expires_at <= excluded.created_at",
            (org_id, key, print_, status, body, to_text(now), to_text(now + KEY_TTL)),
        )
    )


def _replay(row: Row, print_: str, result_type: type[R]) -> R:
    if row["fingerprint"] != print_:
        raise IdempotencyKeyReused()
    if row["state"] != "done":
        raise IdempotencyInFlight()
    body = json.loads(row["body"])
    if row["status"] >= 400:
        error = TreasuryError.from_body(row["status"], body)
        error.replayed = True
        raise error
    result = result_type.model_validate(body)
    result.mark_replayed()
    return result


def purge_expired(tx: Transaction, now: str) -> int:
    """Forget keys older than 24 hours; returns how many."""
    return tx.execute("DELETE FROM idempotency_keys WHERE expires_at <= ?", (now,))
