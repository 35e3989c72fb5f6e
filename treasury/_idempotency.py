"""Idempotency keys (draft-ietf-httpapi-idempotency-key-header, Stripe semantics).

The key is claimed, the operation runs and its outcome is stored in one storage
transaction, so concurrent requests with one key queue on the claim and then replay.
Scope is (organization, key); the fingerprint is method, path and canonical body.
Only successes and 4xx business errors (404, 409, ...) are stored. Outcomes that must
stay retryable are not: 400, 401, 429 and every 5xx (the whole transaction rolls back,
claim included).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from ._clock import to_text
from ._runtime import Scope
from .backends.storage.base import Transaction
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


def fingerprint(method: str, path: str, body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
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
    request: tuple[str, str, Mapping[str, Any]],
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
    method, path, body = request
    print_ = fingerprint(method, path, body)
    now = scope.runtime.now()
    failure: TreasuryError | None = None
    with storage.transaction() as tx:
        tx.execute(
            "DELETE FROM idempotency_keys WHERE org_id = ? AND key = ? AND expires_at <= ?",
            (scope.org_id, key, to_text(now)),
        )
        claimed = tx.query(
            "INSERT INTO idempotency_keys (org_id, key, fingerprint, state, created_at, expires_at)"
            " VALUES (?, ?, ?, 'in_flight', ?, ?) ON CONFLICT (org_id, key) DO NOTHING"
            " RETURNING key",
            (scope.org_id, key, print_, to_text(now), to_text(now + KEY_TTL)),
        )
        if not claimed:
            return _replay(tx, scope.org_id, key, print_, result_type)
        try:
            with storage.transaction() as savepoint:
                result = operation(savepoint)
            outcome: tuple[int, Mapping[str, Any]] = (status, result.to_json())
        except TreasuryError as error:
            if error.status in NOT_STORED or error.status >= 500:
                raise
            failure, outcome = error, (error.status, error.to_body())
        tx.execute(
            "UPDATE idempotency_keys SET state = 'done', status = ?, body = ?"
            " WHERE org_id = ? AND key = ?",
            (outcome[0], json.dumps(outcome[1]), scope.org_id, key),
        )
    if failure is not None:
        raise failure
    return result


def _replay(tx: Transaction, org_id: str, key: str, print_: str, result_type: type[R]) -> R:
    row = tx.one(
        "SELECT fingerprint, state, status, body FROM idempotency_keys"
        " WHERE org_id = ? AND key = ?",
        (org_id, key),
    )
    if row is None:  # claimed by a transaction that rolled back meanwhile: caller may retry
        raise IdempotencyInFlight()
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
