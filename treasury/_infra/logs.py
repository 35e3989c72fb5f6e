"""Log lines a person can read: a condition that recurs pass after pass (a wallet without
gas, a chain that does not answer) is written when it starts or changes, and once when it
ends; the rest of the time the log stays quiet."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable


class Conditions:
    """Standing conditions by key (``"<job>: <part>"``), each logged when it starts or its
    message changes, and once more ("resolved") when a pass of its job no longer reports
    it. Thread-safe."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log, self._lock = logger, threading.Lock()
        self._standing: dict[str, str] = {}  # key -> the message last logged
        self._reported: set[str] = set()  # keys reported since the last `settle`

    def report(
        self, key: str, message: str, *, level: int = logging.WARNING, exc_info: bool = False
    ) -> None:
        """`key` holds now, described by `message`: logged unless already standing as is."""
        with self._lock:
            self._reported.add(key)
            if self._standing.get(key) == message:
                return
            self._standing[key] = message
        self._log.log(level, "%s", message, exc_info=exc_info)

    def settle(self, scopes: Iterable[str]) -> None:
        """End of a pass of the jobs named in `scopes`: their conditions not reported
        since the last call have ended."""
        names = set(scopes)
        with self._lock:
            ended = [
                (key, message)
                for key, message in self._standing.items()
                if key.split(":", 1)[0] in names and key not in self._reported
            ]
            for key, _ in ended:
                del self._standing[key]
            self._reported = {k for k in self._reported if k.split(":", 1)[0] not in names}
        for _, message in ended:
            self._log.info("resolved: %s", message)
