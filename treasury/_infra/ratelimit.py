"""Request limits: a moving window per API key, and one per client address for requests
without a valid key.

Counters live in this process (``memory://``: a window of hit times per caller, under
one lock) or, when several processes serve, in shared storage: Redis (``redis://``,
``rediss://``, ``unix://``) through one script of our own on connections of our own, any
other `limits` storage URL through the `limits` library. Both windows of our own replace
`limits`' for speed: its memory storage starts a timer thread every 10 ms to expire
entries, and its Redis window takes two round trips per request (the hit, then the
stats for the headers) where the script takes one.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from limits import RateLimitItem, parse, storage, strategies

from ..errors import RateLimited, TreasuryError
from .imports import install_hint


@dataclass(frozen=True)
class Quota:
    """Where a caller stands after a counted request (the ``X-RateLimit-*`` headers)."""

    limit: int
    remaining: int

    @property
    def headers(self) -> dict[str, str]:
        return {"X-RateLimit-Limit": str(self.limit), "X-RateLimit-Remaining": str(self.remaining)}


class RateLimiter:
    """E.g. ``"100/60 seconds"`` per key and per anonymous address; counters at `storage_url`.

    `clock` (seconds, monotonic) times the ``memory://`` windows; shared storage uses its
    own clock (Redis': one for every process).
    """

    def __init__(
        self,
        limit: str = "100/60 seconds",
        storage_url: str = "memory://",
        anonymous_limit: str = "100/60 seconds",
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.limit = limit
        self._script: _HitScript | None = None
        per_key, per_address = parse(limit), parse(anonymous_limit)
        if storage_url.startswith("memory://"):
            self._key: _Window = _MemoryWindow(per_key, clock)
            self._address: _Window = _MemoryWindow(per_address, clock)
        elif storage_url.startswith(_REDIS_SCHEMES):
            try:
                import redis  # the `redis` extra
            except ImportError as error:
                raise TreasuryError(install_hint(error, "rate_limit_storage redis://")) from error

            self._script = _HitScript(redis.Redis.from_url(storage_url))
            self._key = _RedisWindow(self._script, per_key, "key")
            self._address = _RedisWindow(self._script, per_address, "address")
        else:
            shared = strategies.MovingWindowRateLimiter(storage.storage_from_string(storage_url))
            self._key = _SharedWindow(shared, per_key, "key")
            self._address = _SharedWindow(shared, per_address, "address")

    def hit_key(self, api_key_id: str) -> Quota:
        """Count one request of a valid key; `RateLimited` when over its limit."""
        return self._key.hit(api_key_id)

    def hit_address(self, address: str) -> Quota:
        """Count one request that carried no valid key, by the client's address."""
        return self._address.hit(address)

    def close(self) -> None:
        """Close the Redis connections (nothing to close for the other storages)."""
        if self._script is not None:
            self._script.close()


class _Window(Protocol):
    def hit(self, who: str) -> Quota: ...


class _MemoryWindow:
    """A moving window of hit times per caller, in this process."""

    def __init__(self, item: RateLimitItem, clock: Callable[[], float]) -> None:
        self._limit, self._span = item.amount, float(item.get_expiry())
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._calls = 0

    def hit(self, who: str) -> Quota:
        now = self._clock()
        with self._lock:
            hits = self._hits.setdefault(who, deque())
            while hits and hits[0] <= now - self._span:
                hits.popleft()
            if len(hits) >= self._limit:
                retry_after = max(1, math.ceil(hits[0] + self._span - now))
                quota = Quota(self._limit, 0)
                raise RateLimited(retry_after, quota=quota.headers)
            hits.append(now)
            self._calls += 1
            if self._calls % 10_000 == 0:  # forget callers whose window has emptied
                self._hits = {k: v for k, v in self._hits.items() if v and v[-1] > now - self._span}
            return Quota(self._limit, self._limit - len(hits))


_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")

#: One moving window in one round trip: drop the hits older than the span, then count
#: this one if there is room. Times are the Redis server's (one clock for every process),
#: in microseconds; a hit's member is unique (the caller adds a random suffix). Returns
#: [allowed, hits in the window, microseconds until the oldest hit leaves it].
_HIT = """
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000000 + tonumber(now[2])
local limit, span = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - span)
local hits = redis.call('ZCARD', KEYS[1])
if hits >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, hits, tonumber(oldest[2]) + span - now}
end
redis.call('ZADD', KEYS[1], now, now .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(span / 1000))
return {1, hits + 1, 0}
"""


class _HitScript:
    """`_HIT` sent as a packed ``EVALSHA`` on connections of our own, each taken once from
    the client's pool: the client's per-command path (checkout, retry wrapper, metrics)
    costs more CPU than the round trip, and so does its packing: the command is packed
    here (`_evalsha`, its head once). Idle connections wait in a deque (``pop`` and
    ``append`` are atomic): a connection serves one thread at a time, and there are no
    more of them than hits ever in flight at once, however many threads come and go.
    `close` (`RateLimiter.close`, from `Treasury.close`) disconnects them."""

    def __init__(self, client: Any) -> None:
        from redis import exceptions

        self._client, self._pool = client, client.connection_pool
        self._sha = client.register_script(_HIT).sha
        self._head = _bulk(b"EVALSHA") + _bulk(self._sha.encode()) + _bulk(b"1")
        self._idle: deque[Any] = deque()
        self._lost = (exceptions.ConnectionError, exceptions.TimeoutError)
        self._no_script = exceptions.NoScriptError

    def __call__(self, key: str, *args: int | str) -> list[int]:
        """The script's answer for `key`. A connection found closed or timed out (Redis
        restarted, the connection killed) is tried once more, on a new socket; a second
        failure is raised, as is a refused first connection (Redis down). A Redis without
        the script (flushed, restarted) is sent the script itself (``EVAL`` keeps it)."""
        try:
            conn = self._idle.pop()
        except IndexError:
            conn = self._pool.get_connection()  # connects: Redis down raises here
        try:
            try:
                return self._run(conn, key, args)
            except self._lost:
                conn.disconnect()
                return self._run(conn, key, args)  # connects again
        except BaseException:
            conn.disconnect()  # whatever was left unread goes with the socket
            raise
        finally:
            self._idle.append(conn)

    def _run(self, conn: Any, key: str, args: tuple[int | str, ...]) -> list[int]:
        conn.send_packed_command([self._evalsha(key, args)])
        try:
            answer: list[int] = conn.read_response()
        except self._no_script:
            conn.send_packed_command(conn.pack_command("EVAL", _HIT, 1, key, *args))
            answer = conn.read_response()
        return answer

    def _evalsha(self, key: str, args: tuple[int | str, ...]) -> bytes:
        """``EVALSHA sha 1 key *args`` as the client would pack it."""
        values = b"".join(_bulk(str(value).encode()) for value in (key, *args))
        return b"*%d\r\n" % (4 + len(args)) + self._head + values

    def close(self) -> None:
        """Disconnect every connection of the client's pool, ours among them."""
        self._idle.clear()
        self._client.close()


def _bulk(value: bytes) -> bytes:
    """One RESP bulk string."""
    return b"$%d\r\n%s\r\n" % (len(value), value)


class _RedisWindow:
    """A moving window in Redis shared by every process: a sorted set of hit times per
    caller, checked and counted by one script (`_HIT`)."""

    def __init__(self, script: _HitScript, item: RateLimitItem, kind: str) -> None:
        self._hit = script
        self._limit, self._span_us = item.amount, item.get_expiry() * 1_000_000
        self._prefix = f"treasury:ratelimit:{kind}:{item.amount}/{item.get_expiry()}:"

    def hit(self, who: str) -> Quota:
        allowed, hits, wait_us = self._hit(
            self._prefix + who, self._limit, self._span_us, os.urandom(6).hex()
        )
        quota = Quota(self._limit, max(0, self._limit - int(hits)))
        if allowed:
            return quota
        raise RateLimited(max(1, math.ceil(int(wait_us) / 1_000_000)), quota=quota.headers)


class _SharedWindow:
    """A moving window in any other shared storage `limits` knows (memcached, ...)."""

    def __init__(self, limiter: strategies.MovingWindowRateLimiter, item: RateLimitItem, kind: str):
        self._limiter, self._item, self._kind = limiter, item, kind

    def hit(self, who: str) -> Quota:
        allowed = self._limiter.hit(self._item, "treasury", self._kind, who)
        stats = self._limiter.get_window_stats(self._item, "treasury", self._kind, who)
        quota = Quota(limit=self._item.amount, remaining=max(0, stats.remaining))
        if allowed:
            return quota
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise RateLimited(retry_after, quota=quota.headers)
