"""The rate limit of DESIGN §3, on the defaults: 100 requests per 60 s per key, headers on
every authenticated answer, and a separate budget per address for requests without a
valid key."""

from __future__ import annotations

import secrets

import httpx
import pytest

from treasury import Treasury
from treasury._infra.ratelimit import RateLimiter
from treasury.errors import RateLimited
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant, require_redis

REDIS_DB = 12  # a database of its own, emptied before and after each test


@pytest.fixture(params=["memory", "redis"])
def counters(request):
    """Where the counters live: this process, or Redis (shared by every process)."""
    if request.param == "memory":
        yield "memory://"
        return
    url = require_redis().rsplit("/", 1)[0] + f"/{REDIS_DB}"
    redis = pytest.importorskip("redis").Redis.from_url(url)
    redis.flushdb()
    yield url
    redis.flushdb()


@pytest.fixture
def server(new_storage_url, counters):
    t = Treasury.open(
        new_storage_url("rl.db"), master_key=MASTER_KEY, chains={}, rate_limit_storage=counters
    )
    with serve(create_app(t)) as url:
        yield t, url
    t.close()


def test_the_window_moves(counters):
    """A moving window: a hit leaves the count once its span has passed, and a caller
    over the limit is told when the oldest hit will leave. Time moves without waiting:
    the memory window reads an injected clock; in Redis, whose own clock times the hits,
    the stored hits are made older instead."""
    now = [1000.0]
    limiter = RateLimiter(
        "3/1 second", counters, anonymous_limit="2/1 second", clock=lambda: now[0]
    )

    def let_pass(seconds: float) -> None:
        now[0] += seconds
        if counters.startswith("redis"):
            redis = pytest.importorskip("redis").Redis.from_url(counters)
            for key in redis.scan_iter("treasury:ratelimit:*"):
                aged = {
                    m: s - seconds * 1_000_000 for m, s in redis.zrange(key, 0, -1, withscores=True)
                }
                redis.zadd(key, aged)

    assert [limiter.hit_key("k").remaining for _ in range(3)] == [2, 1, 0]
    with pytest.raises(RateLimited) as over:
        limiter.hit_key("k")
    assert over.value.headers["Retry-After"] == "1"
    assert over.value.headers["X-RateLimit-Remaining"] == "0"
    assert limiter.hit_key("other").remaining == 2  # callers are counted apart
    assert limiter.hit_address("k").remaining == 1  # and keys apart from addresses
    let_pass(0.5)
    with pytest.raises(RateLimited):  # half the span: the hits still count
        limiter.hit_key("k")
    let_pass(0.55)
    assert limiter.hit_key("k").remaining == 2


def test_the_101st_request_in_a_minute_is_429_with_headers_on_every_answer(server):
    t, url = server
    tenant = make_tenant(t)
    with httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}) as c:
        answers = [c.get("/v1/wallets") for _ in range(98)]
        answers.append(c.delete("/v1/wallets/0x" + "ab" * 20))  # an error answer too
        answers.append(c.post("/v1/recipients", json={}))  # a 400
        limited = c.get("/v1/wallets")
    assert [r.status_code for r in answers] == [200] * 98 + [404, 400]
    assert [r.headers["X-RateLimit-Limit"] for r in answers] == ["100"] * 100
    assert [int(r.headers["X-RateLimit-Remaining"]) for r in answers] == list(range(99, -1, -1))
    assert limited.status_code == 429 and limited.json()["error"] == "Rate limit exceeded"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert limited.headers["X-RateLimit-Remaining"] == "0"


def test_a_flood_of_bad_keys_is_limited_by_address_and_spares_valid_keys(server):
    t, url = server
    tenant = make_tenant(t)
    statuses = []
    with httpx.Client(base_url=url) as c:
        for i in range(250):
            bad = "trk_" + secrets.token_hex(8) + "_" + secrets.token_urlsafe(8)
            headers = {"x-api-key": [bad, "", "garbage"][i % 3]}
            statuses.append(c.get("/v1/wallets", headers=headers).status_code)
        valid = c.get("/v1/wallets", headers={"x-api-key": tenant.secret})
    assert statuses == [401] * 100 + [429] * 150  # never a 5xx
    assert valid.status_code == 200 and valid.headers["X-RateLimit-Remaining"] == "99"


def test_the_public_artifacts_are_exempt(server):
    _, url = server
    with httpx.Client(base_url=url) as c:
        assert {c.get("/v1/yield/artifacts").status_code for _ in range(130)} == {200}
