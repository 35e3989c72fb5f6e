"""The per-API-key request limit, on the `limits` library (memory or Redis counters)."""

from __future__ import annotations

import math
import time

from limits import parse, storage, strategies

from .errors import RateLimited


class RateLimiter:
    """A moving window per API key, e.g. ``"100/10 seconds"``; counters at `storage_url`."""

    def __init__(self, limit: str = "100/10 seconds", storage_url: str = "memory://"):
        self.limit = limit
        self._item = parse(limit)
        self._limiter = strategies.MovingWindowRateLimiter(storage.storage_from_string(storage_url))

    def hit(self, api_key_id: str) -> None:
        """Count one request; raise `RateLimited` with `retry_after` seconds when over."""
        if self._limiter.hit(self._item, "treasury", api_key_id):
            return
        reset_at, _ = self._limiter.get_window_stats(self._item, "treasury", api_key_id)
        raise RateLimited(retry_after=max(1, math.ceil(reset_at - time.time())))
