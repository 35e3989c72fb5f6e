"""API keys as this process last read them, for a few seconds: the look-up every request
would otherwise make.

A key revoked (or deleted) through another process is refused by this one within
`KEY_TTL` of the revocation; through this process, at once (`forget`). A row is kept only
after a secret matched it, so unknown or forged keys never fill the cache, and the secret
is checked against the kept hash on every request. Times come from the runtime's clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from ..backends.storage.base import Row

#: How long a key's row read from the store answers for it in this process.
KEY_TTL = timedelta(seconds=5)
_MOST = 10_000  # rows kept at most; beyond, the cache starts again empty


class KeyCache:
    def __init__(self, clock: Callable[[], datetime], ttl: timedelta = KEY_TTL) -> None:
        self._clock, self._ttl = clock, ttl
        self._rows: dict[str, tuple[datetime, Row]] = {}
        self._lock = threading.Lock()

    def get(self, key_id: str) -> Row | None:
        """The row kept for `key_id` if read less than the TTL ago, else None."""
        kept = self._rows.get(key_id)
        if kept is None or self._clock() - kept[0] >= self._ttl:
            return None
        return kept[1]

    def keep(self, key_id: str, row: Row, read_at: datetime) -> None:
        """Keep the row of a key whose secret matched, read from the store at `read_at`."""
        with self._lock:
            if len(self._rows) >= _MOST:
                self._rows = {}
            self._rows[key_id] = (read_at, row)

    def forget(self, key_id: str) -> None:
        with self._lock:
            self._rows.pop(key_id, None)
