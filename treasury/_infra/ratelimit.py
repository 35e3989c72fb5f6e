"""Request limits: a moving window per API key, and one per client address for requests
without a valid key.

Counters live in this process (``memory://``: a window of hit times per caller, under
one lock) or, when several processes serve, in Redis through the `limits` library. The
in-process window is our own: `limits`' memory storage starts a timer thread every 10 ms
to expire its entries, which costs more than the whole check here.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from limits import RateLimitItem, parse, storage, strategies

from ..errors import RateLimited


@dataclass(frozen=True)
class Quota:
    """Where a caller stands after a counted request (the ``X-RateLimit-*`` headers)."""

    limit: int
    remaining: int

    @property
    def headers(self) -> dict[str, str]:
        return {"X-RateLimit-Limit": str(self.limit), "X-RateLimit-Remaining": str(self.remaining)}


class RateLimiter:
    """E.g. ``"100/60 seconds"`` per key and per anonymous address; counters at `storage_url`."""

    def __init__(
        self,
        limit: str = "100/60 seconds",
        storage_url: str = "memory://",
        anonymous_limit: str = "100/60 seconds",
    ):
        self.limit = limit
        per_key, per_address = parse(limit), parse(anonymous_limit)
        if storage_url.startswith("memory://"):
            self._key: _Window = _MemoryWindow(per_key)
            self._address: _Window = _MemoryWindow(per_address)
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


class _Window(Protocol):
    def hit(self, who: str) -> Quota: ...


class _MemoryWindow:
    """A moving window of hit times per caller, in this process."""

    def __init__(self, item: RateLimitItem) -> None:
        self._limit, self._span = item.amount, float(item.get_expiry())
        self._hits: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._calls = 0

    def hit(self, who: str) -> Quota:
        now = time.monotonic()
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


class _SharedWindow:
    """A moving window in shared storage (Redis), through `limits`."""

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
