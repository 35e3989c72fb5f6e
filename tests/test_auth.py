"""Authentication (the three 401 texts) and the per-key rate limit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from treasury import AuthenticationError, Treasury
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, require_redis


def get(base_url: str, key: str | None, path: str = "/v1/wallets") -> httpx.Response:
    headers = {} if key is None else {"x-api-key": key}
    return httpx.get(base_url + path, headers=headers)


def test_missing_key(base_url):
    r = get(base_url, None)
    assert r.status_code == 401 and r.json() == {"error": "API key required"}


@pytest.mark.parametrize("key", ["nonsense", "trk_", "trk_abc_def", "trk_0000000000000000_x"])
def test_invalid_key(base_url, key):
    r = get(base_url, key)
    assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}


def test_a_valid_key_with_a_wrong_secret_is_unauthorized(base_url, tenant):
    forged = tenant.secret[:-4] + ("AAAA" if not tenant.secret.endswith("AAAA") else "BBBB")
    assert get(base_url, forged).json() == {"error": "Unauthorized"}
    assert get(base_url, tenant.secret).status_code == 200


def test_revoked_key(treasury, base_url, tenant):
    assert get(base_url, tenant.secret).status_code == 200
    treasury.admin.revoke_api_key(tenant.key_id)
    r = get(base_url, tenant.secret)
    assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}


def test_expired_key(base_url, new_storage_url):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    t = Treasury.open(new_storage_url("clock.db"), master_key=MASTER_KEY, clock=lambda: now[0])
    org = t.admin.create_organization("Acme")
    key = t.admin.create_api_key(org.id, user_id="u", expires_at=now[0] + timedelta(hours=1))
    with serve(create_app(t)) as url:
        assert get(url, key.secret).status_code == 200
        now[0] += timedelta(hours=1)
        r = get(url, key.secret)
        assert r.status_code == 401 and r.json() == {"error": "API key expired"}
    with pytest.raises(AuthenticationError, match="API key expired"):
        t.for_api_key(key.secret)
    t.close()


def test_yield_artifacts_are_public(base_url):
    r = get(base_url, None, "/v1/yield/artifacts")
    assert r.status_code == 200 and r.json() == {"data": [], "count": 0}


def test_keys_are_stored_as_hashes_and_listed_without_secrets(treasury, tenant):
    listed = treasury.admin.list_api_keys(tenant.org.id)
    assert [k.id for k in listed] == [tenant.key_id]
    assert "secret" not in listed[0].to_json()
    with treasury.storage.read() as tx:
        row = tx.one("SELECT secret_hash FROM api_keys WHERE id = ?", (tenant.key_id,))
    assert tenant.secret not in row["secret_hash"] and len(row["secret_hash"]) == 64


def test_rate_limit_is_per_key_with_retry_after(new_storage_url):
    t = Treasury.open(new_storage_url("rl.db"), master_key=MASTER_KEY, rate_limit="5/minute")
    org = t.admin.create_organization("Acme")
    first = t.admin.create_api_key(org.id, user_id="a").secret
    second = t.admin.create_api_key(org.id, user_id="b").secret
    with serve(create_app(t)) as url:
        assert [get(url, first).status_code for _ in range(5)] == [200] * 5
        limited = get(url, first)
        assert limited.status_code == 429
        assert limited.json()["error"] == "Rate limit exceeded"
        retry_after = int(limited.headers["Retry-After"])
        assert 1 <= retry_after <= 60
        assert get(url, second).status_code == 200  # another key has its own budget
        assert get(url, None).status_code == 401  # unauthenticated requests do not count
    t.close()


def test_rate_limit_counters_in_redis_are_shared_between_instances(new_storage_url):
    """Two Treasury instances (as two processes would) share one Redis counter."""
    db = new_storage_url("shared.db")
    limit = {"rate_limit": "3/minute", "rate_limit_storage": require_redis()}
    one = Treasury.open(db, master_key=MASTER_KEY, **limit)
    two = Treasury.open(db, master_key=MASTER_KEY, **limit)
    org = one.admin.create_organization("Acme")
    secret = one.admin.create_api_key(org.id, user_id="u").secret
    one.authenticate(secret)
    two.authenticate(secret)
    one.authenticate(secret)
    from treasury import RateLimited

    with pytest.raises(RateLimited):
        two.authenticate(secret)
    one.close()
    two.close()


def test_a_key_revoked_by_another_process_is_refused_here_within_the_cache_s_ttl(
    storage_url,
):
    """Each process keeps a key's row for `KEY_TTL` (no look-up per request): a key
    revoked through another process (another treasury on the store) is refused here once
    that time has passed, by the clock; through this process, at once."""
    from treasury.admin.key_cache import KEY_TTL

    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    here = Treasury.open(storage_url, master_key=MASTER_KEY, clock=lambda: now[0])
    there = Treasury.open(storage_url, master_key=MASTER_KEY, clock=lambda: now[0])
    org = here.admin.create_organization("Acme")
    first, second = (here.admin.create_api_key(org.id, user_id="u") for _ in range(2))
    here.for_api_key(first.secret)
    here.for_api_key(second.secret)
    there.admin.revoke_api_key(first.id)
    now[0] += KEY_TTL - timedelta(microseconds=1)
    here.for_api_key(first.secret)  # still this process's row, read before the revocation
    with pytest.raises(AuthenticationError, match="Unauthorized"):
        there.for_api_key(first.secret)
    now[0] += timedelta(microseconds=1)
    with pytest.raises(AuthenticationError, match="Unauthorized"):
        here.for_api_key(first.secret)
    here.admin.revoke_api_key(second.id)
    with pytest.raises(AuthenticationError, match="Unauthorized"):
        here.for_api_key(second.secret)
    forged = second.secret[:-4] + ("AAAA" if not second.secret.endswith("AAAA") else "BBBB")
    with pytest.raises(AuthenticationError, match="Unauthorized"):
        here.for_api_key(forged)
    here.close()
    there.close()
