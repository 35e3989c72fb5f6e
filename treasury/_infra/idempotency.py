"""Idempotency keys (draft-ietf-httpapi-idempotency-key-header, Stripe semantics).

Scope is (organization, key); the fingerprint is the operation's name from the table of
operations, its path parameters and the canonical JSON of its validated input. Same key and fingerprint,
finished: the stored outcome is replayed. Same key, other fingerprint: 422. Same key,
still in flight: 409. Keys live 24 hours. Outcomes that must stay retryable are never
stored: 400, 401, 429 and every 5xx.

Two shapes:

* `run` — every effect of the operation is in the database. The operation runs and its
  outcome is stored under the key in one storage transaction. If the key already holds a
  live outcome, the insert fails on it, the transaction rolls back (the operation's
  writes with it) and the stored outcome is replayed. Two extra statements on the common
  path, whose answers are not awaited (on PostgreSQL they go with the COMMIT).
* `run_in_two_phases` — the operation has an effect outside the database (a provider
  registration, a broadcast). Its `Upstream` steps run so: **claim** (write-ahead rows and
  the key, state ``in_flight``, committed together), **perform** (the upstream call,
  outside any transaction), **record** (the outcome and the key's ``done``, committed
  together). A definite refusal upstream abandons the write-ahead rows and releases the
  key, so a retry runs afresh; an ambiguous failure leaves both in flight (retries get
  409) and a job finishes them with `finish` (the same perform and record, never a
  guess), after which the key replays the outcome. Ambiguity is sticky where the steps
  say so (`Upstream.keep`): once any attempt's outcome was unknown, no later failure of
  any kind abandons the rows or frees the key; only evidence (a receipt, the provider's
  answer) resolves them.
* `run_composite` — an operation made of several others, each under a key of its own (a
  batch of transfers: ``"{key}:{index}"``). Its key is held (state ``held``) while it
  runs, under a lease it renews; a second request meanwhile gets 409, and a hold whose
  lease passed (its request died) is taken over. A final answer is stored under the key
  and replayed whole; one that is not (a part still in flight, an upstream failure) frees
  the key, so the same request sent again answers each part afresh from its own key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ..backends.storage.base import DuplicateKey, Row, Storage, Transaction
from ..errors import (
    IdempotencyInFlight,
    IdempotencyKeyReused,
    TreasuryError,
    UpstreamError,
    ValidationError,
)
from . import audit, replays
from .clock import to_text
from .jobs import Report
from .models import Resource
from .runtime import Runtime, Scope

KEY_TTL = timedelta(hours=24)
#: How long a claim is its request's alone before a job may finish it: more than twice
#: the longest upstream call (30 s, 5 s to connect), so a slow request is not taken over.
LEASE = timedelta(seconds=90)
NOT_STORED = frozenset({400, 401, 429})  # and every status >= 500
MAX_KEY_LENGTH = 256

R = TypeVar("R", bound=Resource)
S = TypeVar("S")
#: The claim of a two-phase operation: writes its write-ahead rows, in the transaction
#: that holds the key, and returns their reference.
WriteAhead = Callable[[Transaction], str]


def fingerprint(operation: str, request: BaseModel, path: tuple[object, ...] = ()) -> str:
    """SHA-256 of the operation's name, its path parameters and the validated input's
    JSON (fields in model order)."""
    canonical = request.model_dump_json(exclude_none=True, by_alias=True)
    where = " ".join(str(part) for part in path)
    return hashlib.sha256(f"{operation} {where}\n{canonical}".encode()).hexdigest()


def key_problem(key: object) -> str | None:
    """What is wrong with an Idempotency-Key (its length; text a database stores: no NUL
    character, which a PostgreSQL text column cannot hold, no lone surrogate, which is
    no UTF-8), or None."""
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH:
        return f"must be a string of 1 to {MAX_KEY_LENGTH} characters"
    if "\x00" in key:
        return "must not contain a NUL character"
    if not key.isascii() and any("\ud800" <= c <= "\udfff" for c in key):
        return "must be Unicode text (no lone surrogate)"
    return None


def check_key(key: object) -> str:
    if (problem := key_problem(key)) is not None:
        raise ValidationError.field("header", "Idempotency-Key", problem)
    assert isinstance(key, str)
    return key


def stored(error: TreasuryError) -> bool:
    """Whether an error is an outcome to keep under its key (404, 409, 422, ...; never a
    transient one, such as fiat onboarding not being complete yet)."""
    return error.status not in NOT_STORED and error.status < 500 and not error.transient


# -- one transaction -----------------------------------------------------------------------


def run(
    scope: Scope,
    key: str | None,
    operation: str,
    request: BaseModel,
    write: Callable[[Transaction], R],
    result_type: type[R],
    path: tuple[object, ...] = (),
    *,
    look_first: bool = False,
) -> R:
    """Run `write` in one transaction, at most once per (organization, key). With
    `look_first`, a key that already holds an outcome is replayed before `write` runs:
    for a write whose checks count what its first run wrote (a limit it used up)."""
    storage = scope.runtime.storage
    if key is None:
        with storage.transaction() as tx:
            result = write(tx)
            audit.record(tx, result)
        return result
    hold = KeyHold(scope, check_key(key), fingerprint(operation, request, path))
    if look_first and hold.held(storage):
        return hold.replay(storage, result_type)
    try:
        with storage.transaction() as tx:
            result = write(tx)
            hold.send_done(tx, result.model_dump_json(), _secret(scope.runtime, result))
            audit.record(tx, result)
        return result
    except DuplicateKey as error:  # the key's, or the operation's own (not stored)
        if error.table != "idempotency_keys" and (error.table or not hold.held(storage)):
            raise
    except TreasuryError as error:
        if not stored(error) or hold.keep_error(storage, error):
            raise
    return hold.replay(storage, result_type)


# -- two phases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Upstream(Generic[S, R]):
    """The steps after the claim of an operation with an effect outside the database,
    typed by what its upstream call gives its record step (`S`: a provider's answer, a
    transfer's outcome) and by its result (`R`).

    The claim's write-ahead rows are named by a reference (a string). `perform` and
    `record` also finish work a crash left behind, from a job: `perform` must be safe
    to repeat (it gives the provider an idempotency key of ours, or re-sends the same
    signed bytes) and `record` must be a no-op once recorded.
    """

    perform: Callable[[str], S]  # the upstream call, outside any transaction
    record: Callable[[Transaction, str, S], R]  # its outcome, guarded
    abandon: Callable[[Transaction, str], None]  # undo the write-ahead rows
    #: On every failure of `perform`, in the transaction that handles it, with whether
    #: that failure's outcome is unknown: True keeps the write-ahead rows in flight.
    #: Steps that may move value remember an ambiguity and keep the rows from then on.
    keep: Callable[[Transaction, str, bool], bool] = lambda tx, ref, ambiguous: ambiguous


def run_in_two_phases(
    scope: Scope,
    key: str | None,
    operation: str,
    request: BaseModel,
    prepare: Callable[[], WriteAhead],
    steps: Upstream[S, R],
    result_type: type[R],
    path: tuple[object, ...] = (),
) -> R:
    """Unless the key already holds an outcome (replayed) or a claim (409): `prepare`
    (checks and signing, outside any transaction) gives the claim, which writes the
    write-ahead rows with the key and returns their reference; then perform upstream
    outside any transaction, and record (see the module doc)."""
    storage = scope.runtime.storage
    hold = (
        None
        if key is None
        else KeyHold(scope, check_key(key), fingerprint(operation, request, path))
    )
    try:
        if hold is not None and hold.held(storage):
            raise _Taken()
        write_ahead = prepare()
        with storage.transaction() as tx:
            ref = write_ahead(tx)
            if hold is not None and not hold.insert(tx, "in_flight", resource=ref):
                raise _Taken()  # rolls the claim back
    except _Taken:
        assert hold is not None
        return hold.replay(storage, result_type)
    except TreasuryError as error:
        if hold is None or not stored(error) or hold.keep_error(storage, error):
            raise
        return hold.replay(storage, result_type)
    return finish(scope.runtime, scope.org_id, ref, steps)


def finish(runtime: Runtime, org_id: str, ref: str, steps: Upstream[S, R]) -> R:
    """Perform and record a claimed operation, completing its key (requests and jobs)."""
    storage = runtime.storage
    try:
        performed = steps.perform(ref)
    except TreasuryError as error:  # upstream, or refused for a reason of the request's own
        ambiguous = isinstance(error, UpstreamError) and error.ambiguous
        with storage.transaction() as tx:
            if not steps.keep(tx, ref, ambiguous):  # definite, and never ambiguous before
                steps.abandon(tx, ref)
                _settle(runtime, tx, org_id, ref, error if stored(error) else None)
        raise
    with storage.transaction() as tx:
        result = steps.record(tx, ref, performed)
        body, outcome = _kept(runtime, result.model_dump_json(), _secret(runtime, result))
        tx.execute(
            "UPDATE idempotency_keys SET state = 'done', body = ?, outcome = ?"
            " WHERE org_id = ? AND resource = ? AND state = 'in_flight'",
            (body, outcome, org_id, ref),
        )
        audit.record(tx, result)  # a request's, not a job's (no call runs in a job)
    return result


def finish_many(
    runtime: Runtime,
    claims: Sequence[tuple[str, str, Upstream[Any, R]]],
    after_each: Callable[[], None] | None = None,
) -> list[R | TreasuryError]:
    """`finish` for several claims, each ``(org_id, ref, steps)``: each performed in turn,
    outside any transaction (`after_each` called after each one), then every outcome
    recorded in one transaction, each in a savepoint of its own; a failed perform is kept
    or abandoned as `finish` does. The result of each, or the error it raised, in order.
    Unlike `finish`, no audited call is recorded: the caller records its own."""
    storage = runtime.storage
    performed: list[tuple[bool, Any]] = []
    for _, ref, steps in claims:
        try:
            performed.append((True, steps.perform(ref)))
        except TreasuryError as error:
            performed.append((False, error))
        if after_each is not None:
            after_each()
    results: list[R | TreasuryError] = []
    with storage.transaction():
        for (org_id, ref, steps), (ok, value) in zip(claims, performed, strict=True):
            try:
                with storage.transaction() as part:  # a savepoint
                    if ok:
                        result = steps.record(part, ref, value)
                        body, outcome = _kept(
                            runtime, result.model_dump_json(), _secret(runtime, result)
                        )
                        part.execute(
                            "UPDATE idempotency_keys SET state = 'done', body = ?, outcome = ?"
                            " WHERE org_id = ? AND resource = ? AND state = 'in_flight'",
                            (body, outcome, org_id, ref),
                        )
                        results.append(result)
                        continue
                    failed: TreasuryError = value
                    ambiguous = isinstance(failed, UpstreamError) and failed.ambiguous
                    if not steps.keep(part, ref, ambiguous):
                        steps.abandon(part, ref)
                        _settle(runtime, part, org_id, ref, failed if stored(failed) else None)
                    results.append(failed)
            except TreasuryError as error:  # its record refused (abandoned meanwhile)
                results.append(error)
    return results


def _settle(
    runtime: Runtime, tx: Transaction, org_id: str, ref: str, error: TreasuryError | None
) -> None:
    """After an abandoned claim: keep a storable error under its key, else free the key."""
    if error is None:
        tx.execute(
            "DELETE FROM idempotency_keys WHERE org_id = ? AND resource = ? AND state = 'in_flight'",
            (org_id, ref),
        )
        return
    tx.execute(
        "UPDATE idempotency_keys SET state = 'done', status = ?, body = ?"
        " WHERE org_id = ? AND resource = ? AND state = 'in_flight'",
        (error.status, json.dumps(error.to_body()), org_id, ref),
    )


# -- a composite operation ----------------------------------------------------------------


#: The state of a key that a composite operation holds while it runs: in flight until its
#: lease (its ``expires_at``) passes, then free to be taken over (its request died).
HELD = "held"


class Hold:
    """A composite operation's hold on its key while it runs (`run_composite`)."""

    def __init__(self, runtime: Runtime, key: KeyHold | None) -> None:
        self._runtime, self._key = runtime, key
        self._renewed = runtime.now()

    def renew(self) -> None:
        """Move the hold's lease on, when a third of it has passed (call often: at least
        once per third of `LEASE` while running)."""
        key, now = self._key, self._runtime.now()
        if key is None or now - self._renewed < LEASE / 3:
            return
        self._renewed = now
        with self._runtime.storage.transaction() as tx:
            tx.execute(
                "UPDATE idempotency_keys SET expires_at = ? WHERE org_id = ? AND key = ?"
                " AND state = ? AND fingerprint = ?",
                (to_text(self._runtime.now() + LEASE), key.org_id, key.key, HELD, key.print),
            )


def run_composite(
    scope: Scope,
    key: str | None,
    operation: str,
    request: BaseModel,
    action: Callable[[Hold], tuple[R, bool]],
    result_type: type[R],
) -> R:
    """Run a composite operation (its parts under keys of their own) at most once per
    (organization, key): unless the key holds an outcome (replayed whole) or a live hold
    (409), hold it (``held``, a lease of `LEASE` that `action` renews through its `Hold`),
    run `action`, which answers its result and whether that result is final, then store
    a final one under the key (its audited call recorded in that transaction) or free the
    key. An error frees it too (or is kept, when storable)."""
    storage = scope.runtime.storage
    if key is None:
        return action(Hold(scope.runtime, None))[0]
    hold = KeyHold(scope, check_key(key), fingerprint(operation, request))
    if hold.held(storage):
        return hold.replay(storage, result_type)
    with storage.transaction() as tx:
        taken = not hold.insert(tx, HELD, lease=True)
    if taken:
        return hold.replay(storage, result_type)
    try:
        result, final = action(Hold(scope.runtime, hold))
    except TreasuryError as error:
        kept = stored(error)
        with storage.transaction() as tx:
            hold.release(tx, error if kept else None)
        raise
    except BaseException:
        with storage.transaction() as tx:
            hold.release(tx, None)
        raise
    with storage.transaction() as tx:
        if final:
            hold.release(tx, result)
        else:
            hold.release(tx, None)
        audit.record(tx, result)
    return result


_PURPOSE = "idempotency-outcome"


def _secret(runtime: Runtime, result: Resource) -> bool:
    """Whether a result's stored outcome is sealed: its operation's rule says it holds a
    secret (`Runtime.sealed_outcomes`, from the table's `sealed`)."""
    holds_secret = runtime.sealed_outcomes.get(type(result))
    return holds_secret is not None and holds_secret(result)


def _kept(runtime: Runtime, body: str, sealed: bool) -> tuple[str | None, bytes | None]:
    """An outcome as stored: in the clear (`body`), or encrypted (`outcome`)."""
    if sealed:
        return None, runtime.secrets.encrypt(_PURPOSE, body)
    return body, None


# -- the key's row -------------------------------------------------------------------------


class _Taken(Exception):
    """The key already holds a live outcome or claim: undo this run and replay that."""


class KeyHold:
    """One request's hold on (organization, key)."""

    def __init__(self, scope: Scope, key: str, print_: str) -> None:
        self.runtime, self.org_id, self.key, self.print = scope.runtime, scope.org_id, key, print_
        self.now: datetime = scope.runtime.now()

    def insert(
        self,
        tx: Transaction,
        state: str,
        *,
        status: int | None = None,
        body: str | None = None,
        sealed: bool = False,
        resource: str | None = None,
        lease: bool = False,
    ) -> bool:
        """Hold the key (taking over a finished, expired one, or a hold whose lease
        passed); False if it is taken. `lease`: kept until `LEASE` from now, not 24 h (a
        composite's hold)."""
        return bool(
            tx.execute(
                "INSERT INTO idempotency_keys (org_id, key, fingerprint, state, status, body,"
                " outcome, resource, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (org_id, key) DO UPDATE SET"
                " fingerprint = excluded.fingerprint, state = excluded.state,"
                " status = excluded.status, body = excluded.body, outcome = excluded.outcome,"
                " resource = excluded.resource,"
                " created_at = excluded.created_at, expires_at = excluded.expires_at"
                " WHERE idempotency_keys.expires_at <= excluded.created_at"
                " AND idempotency_keys.state IN ('done', 'held')",
                (
                    self.org_id,
                    self.key,
                    self.print,
                    state,
                    status,
                    *(_kept(self.runtime, body, sealed) if body is not None else (None, None)),
                    resource,
                    to_text(self.now),
                    to_text(self.now + (LEASE if lease else KEY_TTL)),
                ),
            )
        )

    def accept(self, tx: Transaction, result: Resource) -> bool:
        """Hold the key with `result` as its outcome, in the transaction that wrote it
        (a part of a composite, accepted at once); False if the key is taken."""
        return self.insert(
            tx, "done", body=result.model_dump_json(), sealed=_secret(self.runtime, result)
        )

    def release(self, tx: Transaction, outcome: Resource | TreasuryError | None) -> None:
        """End a composite's hold: with its `outcome` stored (replayed for 24 hours from
        now), or freed (None). Nothing when the hold was taken over meanwhile."""
        where = " WHERE org_id = ? AND key = ? AND state = ? AND fingerprint = ?"
        mine = (self.org_id, self.key, HELD, self.print)
        if outcome is None:
            tx.execute("DELETE FROM idempotency_keys" + where, mine)
            return
        status: int | None = None
        body: str | None
        sealed: bytes | None = None
        if isinstance(outcome, TreasuryError):
            status, body = outcome.status, json.dumps(outcome.to_body())
        else:
            body, sealed = _kept(
                self.runtime, outcome.model_dump_json(), _secret(self.runtime, outcome)
            )
        now = self.runtime.now()
        tx.execute(
            "UPDATE idempotency_keys SET state = 'done', status = ?, body = ?, outcome = ?,"
            " created_at = ?, expires_at = ?" + where,
            (status, body, sealed, to_text(now), to_text(now + KEY_TTL), *mine),
        )

    def send_done(self, tx: Transaction, body: str, sealed: bool) -> None:
        """Hold the key with its outcome, the answer unread (`Transaction.send`: on
        PostgreSQL it goes with the COMMIT): a finished, expired holder is taken over;
        a live one fails the transaction with `DuplicateKey` on ``idempotency_keys``,
        which rolls the operation back, at the latest when it commits."""
        now = to_text(self.now)
        tx.send(
            "DELETE FROM idempotency_keys WHERE org_id = ? AND key = ?"
            " AND state IN ('done', 'held') AND expires_at <= ?",
            (self.org_id, self.key, now),
        )
        tx.send(
            "INSERT INTO idempotency_keys (org_id, key, fingerprint, state, body, outcome,"
            " created_at, expires_at) VALUES (?, ?, ?, 'done', ?, ?, ?, ?)",
            (
                self.org_id,
                self.key,
                self.print,
                *_kept(self.runtime, body, sealed),
                now,
                to_text(self.now + KEY_TTL),
            ),
        )

    def keep_error(self, storage: Storage, error: TreasuryError) -> bool:
        """Store a 4xx outcome after its operation rolled back; False if the key was
        taken meanwhile (then that outcome is the one to replay)."""
        with storage.transaction() as tx:
            body = json.dumps(error.to_body())
            return self.insert(tx, "done", status=error.status, body=body)

    def held(self, storage: Storage) -> bool:
        """Whether the key already holds a live outcome, or a claim in flight."""
        row = storage.read_one(
            "SELECT 1 AS held FROM idempotency_keys WHERE org_id = ? AND key = ?"
            " AND (expires_at > ? OR state = 'in_flight')",
            (self.org_id, self.key, to_text(self.now)),
        )
        return row is not None

    def replay(self, storage: Storage, result_type: type[R]) -> R:
        with storage.read() as tx:
            row = tx.one(
                "SELECT fingerprint, state, status, body, outcome FROM idempotency_keys"
                " WHERE org_id = ? AND key = ? AND expires_at > ?",
                (self.org_id, self.key, to_text(self.now)),
            )
        if row is None:  # stored and expired within this call: vanishingly rare
            raise IdempotencyInFlight()
        return _replay(self.runtime, row, self.print, result_type)


def _replay(runtime: Runtime, row: Row, print_: str, result_type: type[R]) -> R:
    if row["fingerprint"] != print_:
        raise IdempotencyKeyReused()
    if row["state"] != "done":
        raise IdempotencyInFlight()
    sealed = row["outcome"]
    text = row["body"] if sealed is None else runtime.secrets.decrypt(_PURPOSE, bytes(sealed))
    body = json.loads(text)
    if row["status"] is not None and row["status"] >= 400:
        error = TreasuryError.from_body(row["status"], body)
        error.replayed = True
        raise error
    result = result_type.model_validate(body)
    replays.mark(result)
    return result


def purge_expired_keys(runtime: Runtime, report: Report) -> None:
    """Job: forget finished keys older than 24 hours."""
    with runtime.storage.transaction() as tx:
        purged = tx.execute(
            "DELETE FROM idempotency_keys WHERE expires_at <= ? AND state IN ('done', 'held')",
            (runtime.now_text(),),
        )
    report.add(idempotency_keys_purged=purged)
