"""The rate limit of DESIGN §3, on the defaults: 100 requests per 60 s per key, headers on
every authenticated answer, and a separate budget per address for requests without a
valid key."""

from __future__ import annotations

import secrets
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treasury import Treasury
from treasury._infra.ratelimit import RateLimiter
from treasury.errors import RateLimited
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant, require_redis

REDIS_DB = 12  # a database of its own, emptied before and after each test
OWN_CONNECTIONS_DB = 14  # the tests of the limiter's connections: a database of their own


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


# The limiter's own connections to Redis: the script flushed, a connection killed, Redis
# gone, many threads at once. Its connections carry a name, so that the server lists them.

LIMITER = "treasury-limiter"


@pytest.fixture
def redis_db() -> Iterator[tuple[str, object]]:
    """The URL of the limiter (its connections named `LIMITER`) and a client of our own."""
    redis = pytest.importorskip("redis")
    url = require_redis().rsplit("/", 1)[0] + f"/{OWN_CONNECTIONS_DB}"
    admin = redis.Redis.from_url(url)
    admin.flushdb()
    yield f"{url}?client_name={LIMITER}", admin
    admin.flushdb()
    admin.close()


def limiter_connections(admin) -> list[str]:
    """The ids of the limiter's connections open at the server."""
    return [c["id"] for c in admin.client_list() if c["name"] == LIMITER]


def test_a_flushed_script_is_sent_again(redis_db):
    """Redis restarted or its scripts flushed: the hit is counted all the same, and the
    script is back for the next ones."""
    url, admin = redis_db
    limiter = RateLimiter("3/1 minute", url)
    assert limiter.hit_key("k").remaining == 2
    admin.script_flush()
    assert limiter.hit_key("k").remaining == 1
    assert limiter.hit_key("k").remaining == 0
    with pytest.raises(RateLimited):
        limiter.hit_key("k")
    assert admin.script_exists(limiter._script._sha) == [True]
    limiter.close()


def test_a_killed_connection_is_replaced(redis_db):
    """The limiter's connection closed by the server between two hits (a restart, an idle
    timeout, CLIENT KILL): the second hit is counted on a new connection."""
    url, admin = redis_db
    limiter = RateLimiter("3/1 minute", url)
    assert limiter.hit_key("k").remaining == 2
    (first,) = limiter_connections(admin)
    admin.client_kill_filter(_id=first)
    assert limiter.hit_key("k").remaining == 1
    (second,) = limiter_connections(admin)
    assert second != first
    limiter.close()
    assert limiter_connections(admin) == []


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(min_size=1, max_size=80),
    args=st.lists(st.one_of(st.integers(min_value=0, max_value=2**63), st.text()), max_size=4),
)
def test_the_script_s_command_is_packed_as_the_client_packs_it(redis_client_pair, key, args):
    """The limiter packs its EVALSHA itself (cheaper than the client's packing): byte for
    byte what redis-py would send, for any key and arguments, non-ASCII text included."""
    script, conn = redis_client_pair
    ours = script._evalsha(key, tuple(args))
    theirs = b"".join(conn.pack_command("EVALSHA", script._sha, 1, key, *args))
    assert ours == theirs


@pytest.fixture(scope="module")
def redis_client_pair():
    """The limiter's script and one of its connections (packing needs no server)."""
    redis = pytest.importorskip("redis")
    from treasury._infra.ratelimit import _HitScript

    url = require_redis().rsplit("/", 1)[0] + f"/{OWN_CONNECTIONS_DB}"
    client = redis.Redis.from_url(url)
    script = _HitScript(client)
    yield script, client.connection_pool.make_connection()
    script.close()


class RelayToRedis:
    """A TCP relay to Redis on a port of its own: `down` closes the port and every
    connection through it (Redis gone, as a client sees it); `up` listens again."""

    def __init__(self) -> None:
        self.port, self._open = 0, []
        self.up()

    def up(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, args=(self._listener,), daemon=True).start()

    def down(self) -> None:
        for s in [self._listener, *self._open]:
            s.shutdown(socket.SHUT_RDWR)  # wakes the threads blocked on it
            s.close()
        self._open = []

    def _serve(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed: down
                return
            upstream = socket.create_connection(("127.0.0.1", 6379))
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass


def test_redis_gone_is_an_error_and_its_return_is_seen(redis_db):
    """With Redis unreachable the hit raises redis' `ConnectionError` (a 500 over HTTP),
    after one more try on a new connection; once Redis is back, hits count again."""
    redis = pytest.importorskip("redis")
    _, admin = redis_db
    relay = RelayToRedis()
    limiter = RateLimiter("3/1 minute", f"redis://127.0.0.1:{relay.port}/{OWN_CONNECTIONS_DB}")
    assert limiter.hit_key("k").remaining == 2
    relay.down()
    with pytest.raises(redis.exceptions.ConnectionError, match="Connection refused"):
        limiter.hit_key("k")  # its connection found closed, a new one refused
    relay.up()
    assert limiter.hit_key("k").remaining == 1
    limiter.close()
    relay.down()
    assert admin.zcard("treasury:ratelimit:key:3/60:k") == 2


def test_redis_down_answers_500(new_storage_url):
    """No Redis at all: an authenticated request is a 500, never let through."""
    pytest.importorskip("redis")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nowhere = f"redis://127.0.0.1:{s.getsockname()[1]}/{OWN_CONNECTIONS_DB}"
    t = Treasury.open(
        new_storage_url("rl.db"), master_key=MASTER_KEY, chains={}, rate_limit_storage=nowhere
    )
    tenant = make_tenant(t)
    with serve(create_app(t)) as url:
        answer = httpx.get(url + "/v1/wallets", headers={"x-api-key": tenant.secret})
    t.close()
    assert answer.status_code == 500 and answer.json()["error"] == "Internal server error"


def test_many_threads_count_exactly_and_share_few_connections(redis_db, new_storage_url):
    """Hits from many threads at once are each counted once (every remaining count is
    seen once); threads that come and go leave no connection behind, and closing the
    treasury closes the limiter's."""
    url, admin = redis_db
    threads, hits, limit = 16, 50, 10_000
    t = Treasury.open(
        new_storage_url("rl.db"),
        master_key=MASTER_KEY,
        chains={},
        rate_limit=f"{limit}/1 hour",
        rate_limit_storage=url,
    )
    start = threading.Barrier(threads)
    seen: list[int] = []

    def hammer() -> None:
        start.wait()
        seen.extend(t.rate_limiter.hit_key("k").remaining for _ in range(hits))

    workers = [threading.Thread(target=hammer) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(seen) == list(range(limit - threads * hits, limit))
    assert admin.zcard(f"treasury:ratelimit:key:{limit}/3600:k") == threads * hits
    opened = len(limiter_connections(admin))
    assert 1 <= opened <= threads

    for _ in range(20):  # a thread per request, as a threaded server starts them
        one = threading.Thread(target=t.rate_limiter.hit_address, args=("1.2.3.4",))
        one.start()
        one.join()
    assert len(limiter_connections(admin)) == opened
    t.close()
    assert limiter_connections(admin) == []
