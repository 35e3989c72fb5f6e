"""Idempotency-Key semantics (DESIGN §3) over HTTP and in Python."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treasury import IdempotencyKeyReused, Treasury

from .conftest import MASTER_KEY, make_tenant
from .helpers import address


def test_replay_returns_the_same_status_and_body(client):
    headers = {"Idempotency-Key": "order-1"}
    first = client.post("/v1/wallets", json={"label": "Ops"}, headers=headers)
    again = client.post("/v1/wallets", json={"label": "Ops"}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert client.get("/v1/wallets").json()["count"] == 1


def test_another_body_with_the_same_key_is_422(client):
    headers = {"Idempotency-Key": "order-2"}
    client.post("/v1/recipients", json={"address": address(), "label": "A"}, headers=headers)
    r = client.post("/v1/recipients", json={"address": address(), "label": "A"}, headers=headers)
    assert r.status_code == 422
    assert r.json() == {"error": "Idempotency-Key was already used with a different request"}
    assert client.get("/v1/recipients").json()["count"] == 1


def test_the_same_key_on_another_endpoint_is_422(client):
    client.post("/v1/wallets", json={}, headers={"Idempotency-Key": "shared"})
    r = client.post(
        "/v1/recipients",
        json={"address": address(), "label": "A"},
        headers={"Idempotency-Key": "shared"},
    )
    assert r.status_code == 422


@pytest.mark.parametrize("key", ["", "k" * 257])
def test_key_length_outside_1_to_256_is_400(client, key):
    r = client.post("/v1/wallets", json={}, headers={"Idempotency-Key": key})
    assert r.status_code == 400
    assert r.json()["details"]["fields"][0]["field"] == "Idempotency-Key"
    assert (
        client.post("/v1/wallets", json={}, headers={"Idempotency-Key": "k" * 256}).status_code
        == 201
    )


def test_missing_key_is_400_on_the_three_routes(client):
    for path, body in [
        ("/v1/wallets", {}),
        ("/v1/recipients", {"address": address(), "label": "A"}),
    ]:
        r = client.post(path, json=body)
        assert r.status_code == 400, path
        assert r.json()["details"]["fields"][0]["field"] == "Idempotency-Key"


def test_validation_failures_are_not_stored(client):
    headers = {"Idempotency-Key": "fix-and-retry"}
    bad = client.post("/v1/wallets", json={"label": ""}, headers=headers)
    assert bad.status_code == 400
    good = client.post("/v1/wallets", json={"label": "Fixed"}, headers=headers)
    assert good.status_code == 201 and good.json()["label"] == "Fixed"


def test_a_stored_409_replays(client):
    target = address()
    client.post(
        "/v1/recipients", json={"address": target, "label": "A"}, headers={"Idempotency-Key": "a"}
    )
    headers = {"Idempotency-Key": "b"}
    first = client.post("/v1/recipients", json={"address": target, "label": "B"}, headers=headers)
    again = client.post("/v1/recipients", json={"address": target, "label": "B"}, headers=headers)
    assert first.status_code == again.status_code == 409
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"


def test_twenty_threads_with_one_key_create_exactly_one_wallet(base_url, tenant, treasury):
    barrier = threading.Barrier(20)
    results: list[httpx.Response] = []
    lock = threading.Lock()

    def send() -> None:
        with httpx.Client(base_url=base_url, headers={"x-api-key": tenant.secret}) as c:
            barrier.wait()
            r = c.post("/v1/wallets", json={"label": "Race"}, headers={"Idempotency-Key": "race"})
        with lock:
            results.append(r)

    threads = [threading.Thread(target=send) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = Counter(r.status_code for r in results)
    assert set(statuses) <= {201, 409}
    created = [r for r in results if r.status_code == 201]
    assert sum(1 for r in created if "Idempotent-Replayed" not in r.headers) == 1
    assert len({r.json()["address"] for r in created}) == 1
    with treasury.storage.read() as tx:
        assert tx.one("SELECT COUNT(*) AS n FROM wallets")["n"] == 1
        assert tx.one("SELECT COUNT(*) AS n FROM custody_keys")["n"] == 1


def test_the_same_key_in_another_organization_is_independent(treasury, tenant):
    other = make_tenant(treasury, "Globex")
    mine = tenant.org.wallets.create(label="Mine", idempotency_key="same")
    theirs = other.org.wallets.create(label="Theirs", idempotency_key="same")
    assert not theirs.replayed and theirs.address != mine.address
    assert other.org.wallets.list().data == [theirs]
    # a different body under the same key is still a conflict only within one organization
    with pytest.raises(IdempotencyKeyReused):
        other.org.wallets.create(label="Other body", idempotency_key="same")


def test_keys_expire_after_24_hours(new_storage_url):
    now = [datetime(2026, 3, 1, tzinfo=UTC)]
    t = Treasury.open(new_storage_url("ttl.db"), master_key=MASTER_KEY, clock=lambda: now[0])
    org = make_tenant(t).org
    first = org.wallets.create(label="Day 1", idempotency_key="daily")
    now[0] += timedelta(hours=23, minutes=59)
    assert org.wallets.create(label="Day 1", idempotency_key="daily").replayed
    now[0] += timedelta(minutes=1)
    fresh = org.wallets.create(label="Day 2", idempotency_key="daily")
    assert not fresh.replayed and fresh.address != first.address
    now[0] += timedelta(hours=25)
    assert t.run_once()["idempotency_keys_purged"] == 1
    t.close()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(calls=st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(["x", "y"])), max_size=12))
def test_property_each_key_runs_once_and_replays_or_refuses(treasury, calls):
    """Any sequence of (key, label) calls: one wallet per key, replays equal, others 422."""
    org = make_tenant(treasury, "Prop").org
    first_by_key: dict[str, tuple[str, object]] = {}
    for key, label in calls:
        if key not in first_by_key:
            first_by_key[key] = (label, org.wallets.create(label=label, idempotency_key=key))
        elif first_by_key[key][0] == label:
            replay = org.wallets.create(label=label, idempotency_key=key)
            assert replay.replayed and replay == first_by_key[key][1]
        else:
            with pytest.raises(IdempotencyKeyReused):
                org.wallets.create(label=label, idempotency_key=key)
    assert org.wallets.list().count == len(first_by_key)


class FlakyCustody:
    """A custody plugin whose service is down for the first `failures` calls (test double
    of an outside service; the local custody does the real work)."""

    def __new__(cls, failures: int):
        from treasury.backends.custody.local import LocalCustody
        from treasury.errors import UpstreamError

        class Flaky(LocalCustody):
            left = failures

            def create_key(self):
                if Flaky.left:
                    Flaky.left -= 1
                    raise UpstreamError("custody service unavailable")
                return super().create_key()

        return Flaky()


def test_upstream_failures_are_not_stored_so_a_retry_runs(new_storage_url):
    t = Treasury.open(
        new_storage_url("f.db"), master_key=MASTER_KEY, custody=FlakyCustody(failures=1)
    )
    org = make_tenant(t).org
    from treasury import UpstreamError

    with pytest.raises(UpstreamError):
        org.wallets.create(label="Retry me", idempotency_key="k")
    assert org.wallets.list().count == 0
    wallet = org.wallets.create(label="Retry me", idempotency_key="k")
    assert not wallet.replayed and org.wallets.list().data == [wallet]
    t.close()


def test_replay_under_another_prefix_in_a_host_app(treasury, tenant, base_url):
    from flask import Flask

    from treasury.http import create_blueprint
    from treasury.testing.server import serve

    host = Flask("host")
    host.register_blueprint(create_blueprint(treasury, url_prefix="/api/treasury/v1"))
    headers = {"x-api-key": tenant.secret, "Idempotency-Key": "mounted"}
    with serve(host) as url, httpx.Client(base_url=url, headers=headers) as c:
        first = c.post("/api/treasury/v1/wallets", json={"label": "Mounted"})
        again = c.post("/api/treasury/v1/wallets", json={"label": "Mounted"})
        other = c.post("/api/treasury/v1/wallets", json={"label": "Another"})
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert other.status_code == 422
    # the fingerprint names the operation, not the path: the /v1 app replays it too
    with httpx.Client(base_url=base_url, headers=headers) as c:
        direct = c.post("/v1/wallets", json={"label": "Mounted"})
    assert direct.status_code == 201 and direct.json() == first.json()
    assert tenant.org.wallets.list().count == 1


def test_a_taken_key_replays_when_a_storage_does_not_name_the_table(treasury, tenant, monkeypatch):
    """A storage plugin may raise `DuplicateKey` without its table: a key already held is
    still replayed, and the operation's own duplicate is still its own error. (SQLite's
    translation is replaced by one that names no table, as such a plugin's would.)"""
    from treasury.backends.storage import sqlite
    from treasury.backends.storage.base import DuplicateKey
    from treasury.errors import Conflict

    if not isinstance(treasury.storage, sqlite.SQLiteStorage):
        pytest.skip("replaces SQLite's translation of its driver's error")
    monkeypatch.setattr(sqlite, "_translate", lambda error: DuplicateKey(str(error)))
    first = tenant.org.recipients.create(address=address(), label="A", idempotency_key="k-1")
    again = tenant.org.recipients.create(address=first.address, label="A", idempotency_key="k-1")
    assert again == first and again.replayed
    with pytest.raises(Conflict):  # the address, saved under another key
        tenant.org.recipients.create(address=first.address, label="B", idempotency_key="k-2")
