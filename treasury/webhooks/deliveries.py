"""Webhook deliveries: one per (event, matching webhook), written with the event (the
outbox's fan-out, `treasury._records.events`).

A delivery is ``pending`` until an attempt answers 2xx (``delivered``) or the last retry
fails (``failed``). After a failed attempt the next one waits 5 s, 5 min, 30 min, 2 h,
5 h, 10 h, 14 h, 20 h, then 24 h — lengthened by a jitter of at most 10 %, and by a
``Retry-After`` the receiver sent (capped at 24 h). A 410 disables the webhook: its
pending deliveries fail and later events skip it. Dispatchers claim due deliveries under
a lease, so two never send one at once and a dead one's claims are taken over.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .._infra.clock import to_text
from .._infra.sql import keyset_page, lease_rows
from ..backends.storage.base import Row, Transaction

RETRY_DELAYS = tuple(
    timedelta(seconds=s) for s in (5, 300, 1_800, 7_200, 18_000, 36_000, 50_400, 72_000, 86_400)
)
MAX_DELAY = timedelta(hours=24)
JITTER = 0.10
COLUMNS = (
    "message_id, webhook_id, event_type, status, attempts, next_attempt_at, last_status_code,"
    " last_error, created_at, updated_at"
)


@dataclass(frozen=True)
class Attempt:
    """What one attempt of one delivery gave."""

    delivery_id: int
    webhook_id: int
    attempts_before: int
    status_code: int | None
    error: str | None
    duration_ms: int
    retry_after: timedelta | None = None

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


#: A first attempt waits for the first attempts of the same object's earlier events to
#: the same webhook to end (answered, failed or timed out): they arrive in order.
_IN_ORDER = (
    " AND NOT (attempts = 0 AND object_key IS NOT NULL AND EXISTS (SELECT 1 FROM"
    " webhook_deliveries earlier WHERE earlier.webhook_id = webhook_deliveries.webhook_id"
    " AND earlier.object_key = webhook_deliveries.object_key AND earlier.status = 'pending'"
    " AND earlier.attempts = 0 AND earlier.sequence < webhook_deliveries.sequence))"
)


def lease_due(tx: Transaction, due: str, now: str, until: str, limit: int) -> list[Row]:
    """Take up to `limit` pending deliveries due at `due` whose lease (if any) has passed
    at `now`, leasing them until `until`; with what sending needs. A first attempt is
    taken only once every earlier event of its object to its webhook had its first
    attempt (`_IN_ORDER`): one object's events go out one after the other, in sequence."""
    free = (
        "status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)"
        + _IN_ORDER
    )
    taken = lease_rows(
        tx,
        "webhook_deliveries",
        key="id",
        free=free,
        params=(due, now),
        order_by="next_attempt_at, sequence",
        limit=limit,
        until=until,
        returning="id",
    )
    return sending(tx, [row["id"] for row in taken])


def sending(tx: Transaction, ids: Sequence[int]) -> list[Row]:
    """What an attempt of each delivery needs: its target, secret, payload and count."""
    if not ids:
        return []
    marks = ", ".join("?" * len(ids))
    return tx.query(
        "SELECT d.id, d.message_id, d.attempts, d.webhook_id, w.url, w.secret, w.active,"
        " e.payload FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id"
        f" JOIN events e ON e.id = d.event_id WHERE d.id IN ({marks}) ORDER BY d.id",
        list(ids),
    )


def record(
    tx: Transaction, attempts: Sequence[Attempt], now: datetime, rng: random.Random
) -> dict[str, int]:
    """Record attempts: delivered, or retried later, or failed (the last retry, or a
    410, which also disables the webhook). Counts of each."""
    counts = {"webhooks_delivered": 0, "webhooks_retried": 0, "webhooks_failed": 0}
    at = to_text(now)
    for attempt in attempts:
        number = attempt.attempts_before + 1
        tx.execute(
            "INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error,"
            " duration_ms) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                attempt.delivery_id,
                number,
                at,
                attempt.status_code,
                attempt.error,
                attempt.duration_ms,
            ),
        )
        if attempt.status_code == 410:
            disable(tx, attempt.webhook_id, at)
        if attempt.delivered:
            status, following = "delivered", None
        elif attempt.status_code == 410 or number > len(RETRY_DELAYS):
            status, following = "failed", None
        else:
            status, following = (
                "pending",
                to_text(now + next_delay(number, attempt.retry_after, rng)),
            )
        tx.execute(
            "UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?,"
            " last_status_code = ?, last_error = ?, lease_until = NULL, updated_at = ?"
            " WHERE id = ? AND attempts = ?",
            (
                status,
                number,
                following,
                attempt.status_code,
                attempt.error,
                at,
                attempt.delivery_id,
                attempt.attempts_before,
            ),
        )
        counts[
            {"delivered": "webhooks_delivered", "pending": "webhooks_retried"}.get(
                status, "webhooks_failed"
            )
        ] += 1
    return counts


def next_delay(failed: int, retry_after: timedelta | None, rng: random.Random) -> timedelta:
    """The wait after the `failed`-th failed attempt: the schedule, lengthened by a
    jitter of at most 10 %, at least a `Retry-After`, at most 24 h."""
    scheduled = RETRY_DELAYS[failed - 1] * (1 + rng.uniform(0, JITTER))
    if retry_after is not None:
        scheduled = max(scheduled, retry_after)
    return min(scheduled, MAX_DELAY)


def disable(tx: Transaction, webhook_id: int, now: str) -> None:
    """A 410 (Gone): the webhook takes no more events; its pending deliveries fail."""
    tx.execute("UPDATE webhooks SET active = 0 WHERE id = ?", (webhook_id,))
    tx.execute(
        "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL,"
        " last_error = 'the webhook was disabled (410 Gone)', updated_at = ?"
        " WHERE webhook_id = ? AND status = 'pending' AND lease_until IS NULL",
        (now, webhook_id),
    )


# -- what the API shows ---------------------------------------------------------------------


def page(
    tx: Transaction, webhook_id: int, after: tuple[Any, Any] | None, limit: int
) -> tuple[list[Row], tuple[Any, Any] | None]:
    """A webhook's deliveries, newest first (by creation, then message id)."""
    select = f"SELECT {COLUMNS} FROM webhook_deliveries WHERE webhook_id = ?"
    return keyset_page(tx, select, (webhook_id,), after, limit, key="message_id")


def by_message(tx: Transaction, webhook_id: int, message_id: str) -> Row | None:
    return tx.one(
        f"SELECT id, {COLUMNS} FROM webhook_deliveries WHERE webhook_id = ? AND message_id = ?",
        (webhook_id, message_id),
    )


def lease_one(tx: Transaction, delivery_id: int, now: str, until: str) -> bool:
    """Take one delivery now, whatever its state, unless another sender holds it."""
    return bool(
        tx.execute(
            "UPDATE webhook_deliveries SET lease_until = ?"
            " WHERE id = ? AND (lease_until IS NULL OR lease_until <= ?)",
            (until, delivery_id, now),
        )
    )


def record_resend(tx: Transaction, attempt: Attempt, now: datetime) -> None:
    """Record a manual resend: logged apart, it neither uses up a scheduled attempt nor
    moves the schedule. A 2xx delivers the delivery (nothing is left to send); a 410
    disables the webhook as any attempt's would; otherwise only the last answer changes."""
    at = to_text(now)
    tx.execute(
        "INSERT INTO webhook_resends (delivery_id, at, status_code, error, duration_ms)"
        " VALUES (?, ?, ?, ?, ?)",
        (attempt.delivery_id, at, attempt.status_code, attempt.error, attempt.duration_ms),
    )
    if attempt.status_code == 410:
        disable(tx, attempt.webhook_id, at)
    ended = (
        ", status = 'delivered', next_attempt_at = NULL"
        if attempt.delivered
        else ", status = 'failed', next_attempt_at = NULL"
        if attempt.status_code == 410
        else ""
    )
    tx.execute(
        "UPDATE webhook_deliveries SET last_status_code = ?, last_error = ?,"
        f" lease_until = NULL, updated_at = ?{ended} WHERE id = ?",
        (attempt.status_code, attempt.error, at, attempt.delivery_id),
    )
