"""Helpers every conformance suite shares: threads started together, and errors to abort with."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

THREAD_TIMEOUT = 60.0


class Boom(Exception):
    """Raised by the tests to abort a block."""


class Interrupt(BaseException):
    """Like KeyboardInterrupt: not an Exception, must still roll back."""


def run_threads(targets: list[Callable[[], None]], timeout: float = THREAD_TIMEOUT) -> None:
    """Run each target in its own thread, started together; re-raise the first failure."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(targets))

    def wrap(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                barrier.wait(timeout)
                target()
            except BaseException as error:  # reported to the test below
                errors.append(error)

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "threads still running: deadlock?"
    if errors:
        raise errors[0]


def in_thread(fn: Callable[[], Any], timeout: float = THREAD_TIMEOUT) -> Any:
    """Call `fn` on another thread (its own connection/transaction state); return its result."""
    results: list[Any] = []
    run_threads([lambda: results.append(fn())], timeout)
    return results[0]
