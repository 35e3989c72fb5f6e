"""Two-phase idempotency, shown on bank-account registration over HTTP.

The fiat provider and the storage are test doubles here, declared as such: a sandbox
provider that blocks or fails on demand (the provider cannot be made to misbehave
otherwise), and a store (this run's) that fails one chosen statement once (a disk or
connection failure at the worst moment cannot be produced on demand).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from treasury import Treasury, UpstreamError
from treasury._infra import plugins
from treasury.backends.fiat.base import ExternalAccount
from treasury.backends.fiat.sandbox import SandboxFiat
from treasury.backends.storage.base import Params, Row, Storage, Transaction
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT


class ScriptedProvider(SandboxFiat):
    """The sandbox, but a call can be made to wait for `release`, or to fail."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.failures: list[UpstreamError] = []
        self.calls = 0
        self.keys: dict[str, str] = {}  # our idempotency key (the row's uuid) -> its id

    def register_external_account(
        self, customer_id: str, account: ExternalAccount, *, idempotency_key: str
    ) -> str:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(30)
        if self.failures:
            raise self.failures.pop(0)
        found = super().register_external_account(
            customer_id, account, idempotency_key=idempotency_key
        )
        self.keys[idempotency_key] = found
        return found


class FailOnce(Storage):
    """A store that fails the first statement containing `trap` (then works again); mixed
    into this run's storage class by `fail_once`."""

    trap: str | None = None

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with super().transaction() as tx:
            yield _Tripwire(tx, self)


class _Tripwire(Transaction):
    def __init__(self, inner: Transaction, store: FailOnce) -> None:
        self._inner, self._store = inner, store
        self.skip_locked = inner.skip_locked  # queue claims as the wrapped store makes them

    def _check(self, sql: str) -> None:
        if self._store.trap is not None and self._store.trap in sql:
            self._store.trap = None
            raise OSError("disk I/O error (test double)")

    def _execute(self, sql: str, params: Params) -> int:
        self._check(sql)
        return self._inner.execute(sql, params)

    def _query(self, sql: str, params: Params) -> list[Row]:
        self._check(sql)
        return self._inner.query(sql, params)

    def lock(self, name: str) -> None:
        self._inner.lock(name)


def fail_once(url: str) -> FailOnce:
    """The storage of `url`, as a `FailOnce`."""
    base = plugins.checked_class("storage", url, Storage)
    cls = type(f"FailOnce{base.__name__}", (FailOnce, base), {})
    return cls.from_url(url)


@dataclass
class Env:
    t: Treasury
    provider: ScriptedProvider
    storage: FailOnce
    client: httpx.Client
    now: list[datetime]

    def post(self, key: str | None = "k") -> httpx.Response:
        headers = {} if key is None else {"Idempotency-Key": key}
        return self.client.post("/v1/bank-accounts", json=BANK_ACCOUNT, headers=headers)

    def orphans(self) -> set[str]:
        """Accounts the provider holds that no row of ours names (by our uuid, the key)."""
        with self.storage.read() as tx:
            ours = {r["external_id"] for r in tx.query("SELECT external_id FROM bank_accounts")}
        assert set(self.provider.keys.values()) == set(self.provider.accounts)
        return set(self.provider.keys) - ours

    def later(self, seconds: float) -> None:
        self.now[0] += timedelta(seconds=seconds)


@pytest.fixture
def env(storage_url) -> Iterator[Env]:
    now = [datetime(2026, 5, 4, 12, tzinfo=UTC)]
    provider, storage = ScriptedProvider(), fail_once(storage_url)
    t = Treasury.open(
        storage, master_key=MASTER_KEY, fiat=provider, clock=lambda: now[0], chains={}
    )
    tenant = make_tenant(t)
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}, timeout=30) as client,
    ):
        yield Env(t, provider, storage, client, now)
    t.close()


def test_a_request_in_flight_answers_409_then_the_outcome_replays(env):
    env.provider.release.clear()
    first: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: first.append(env.post()))
    thread.start()
    assert env.provider.entered.wait(10)
    busy = env.post()
    assert busy.status_code == 409
    assert busy.json()["details"]["code"] == "idempotency_in_flight"
    assert env.client.get("/v1/bank-accounts").json()["count"] == 0  # not shown yet
    env.provider.release.set()
    thread.join(10)
    assert first[0].status_code == 201
    replay = env.post()
    assert replay.status_code == 201 and replay.json() == first[0].json()
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert env.client.get("/v1/bank-accounts").json()["count"] == 1
    assert env.provider.calls == 1 and len(env.provider.accounts) == 1


def test_a_failing_insert_leaves_nothing_at_the_provider(env):
    env.storage.trap = "INSERT INTO bank_accounts"
    failed = env.post()
    assert failed.status_code == 500 and "requestId" in failed.json()["details"]
    assert env.provider.calls == 0 and env.provider.accounts == {}
    retry = env.post()  # the key was never claimed: the retry runs
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry.headers
    assert len(env.provider.accounts) == 1 and env.orphans() == set()


def test_a_failure_after_the_provider_call_is_finished_by_the_job(env):
    env.storage.trap = "SET state = 'registered'"
    failed = env.post()
    assert failed.status_code == 500
    assert len(env.provider.accounts) == 1 and env.orphans() == set()  # the row names it
    assert env.post().status_code == 409  # still in flight: never guessed
    assert env.client.get("/v1/bank-accounts").json()["count"] == 0
    assert env.t.run_once()["bank_accounts_registered"] == 0  # the claim's lease holds
    env.later(91)
    summary = env.t.run_once()
    assert summary["bank_accounts_registered"] == 1 and not summary.errors
    assert len(env.provider.accounts) == 1 and env.orphans() == set()  # asked again, same id
    replay = env.post()
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    listed = env.client.get("/v1/bank-accounts").json()["data"]
    assert [row["id"] for row in listed] == [replay.json()["providerExternalAccountId"]]


def test_a_definite_refusal_is_502_and_not_stored(env):
    env.provider.failures.append(UpstreamError("provider refused"))
    refused = env.post()
    assert refused.status_code == 502 and refused.json()["error"] == "provider refused"
    assert env.client.get("/v1/bank-accounts").json()["count"] == 0
    with env.storage.read() as tx:
        assert tx.one("SELECT COUNT(*) AS n FROM bank_accounts") == {"n": 0}
    retry = env.post()
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry.headers
    # the refused claim's number (its counter committed with the claim) is skipped
    assert retry.json()["id"] == 2


def test_an_ambiguous_failure_keeps_the_claim_until_the_job_resolves_it(env):
    env.provider.failures.append(UpstreamError("provider timed out", ambiguous=True))
    assert env.post().status_code == 502
    assert env.post().status_code == 409
    env.later(91)
    assert env.t.run_once()["bank_accounts_registered"] == 1
    replay = env.post()
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    assert len(env.provider.accounts) == 1 and env.orphans() == set()


def test_without_a_key_a_crash_after_the_provider_call_is_finished_too(env):
    env.storage.trap = "SET state = 'registered'"
    assert env.post(key=None).status_code == 500
    env.later(91)
    assert env.t.run_once()["bank_accounts_registered"] == 1
    assert env.client.get("/v1/bank-accounts").json()["count"] == 1
    assert env.orphans() == set()


def test_the_job_takes_a_claim_once_however_many_workers_run(env):
    env.storage.trap = "SET state = 'registered'"
    env.post()
    env.later(91)
    summaries: list[Any] = []
    workers = [
        threading.Thread(target=lambda: summaries.append(env.t.run_once())) for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert sum(s["bank_accounts_registered"] for s in summaries) == 1
    assert env.provider.calls == 2  # the request's call and the job's, one key
