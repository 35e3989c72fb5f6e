"""What the SQLite backend adds beyond the storage suite: private files, a fair writer queue."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from treasury.backends.storage.sqlite import FairLock, SQLiteStorage
from treasury.testing.storage import run_threads

pytestmark = pytest.mark.sqlite_only  # the SQLite backend itself


def test_database_wal_and_shm_files_are_private(tmp_path, treasury, tenant, db_path):
    tenant.org.wallets.create(label="Hot")  # a write: the WAL and shared memory exist
    for suffix in ("", "-wal", "-shm"):
        mode = stat.S_IMODE(os.stat(f"{db_path}{suffix}").st_mode)
        assert mode == 0o600, (suffix, oct(mode))


def test_the_fair_lock_grants_in_arrival_order():
    lock, order, arrived = FairLock(), [], []
    lock.acquire()
    threads = []
    for i in range(8):
        waiting = threading.Event()

        def take(i: int = i, waiting: threading.Event = waiting) -> None:
            arrived.append(i)
            waiting.set()
            lock.acquire()
            order.append(i)
            lock.release()

        threads.append(threading.Thread(target=take))
        threads[-1].start()
        assert waiting.wait(5)
        while lock._waiting.__len__() < i + 1:  # it is queued before the next arrives
            threading.Event().wait(0.001)
    lock.release()
    for thread in threads:
        thread.join(5)
    assert order == arrived == list(range(8))


def test_concurrent_writers_are_served_in_turn(tmp_path):
    """8 threads write at once: none is overtaken by more than the 7 others (a busy
    handler that sleeps and polls lets a writer be overtaken dozens of times)."""
    store = SQLiteStorage(tmp_path / "queue.db")
    with store.transaction() as tx:
        tx.execute("CREATE TABLE commits (n INTEGER NOT NULL)")
        tx.execute("INSERT INTO commits VALUES (0)")
    guard, finished, worst = threading.Lock(), [0], [0]

    def writer() -> None:
        for _ in range(25):
            with guard:
                before = finished[0]
            with store.transaction() as tx:
                tx.execute("UPDATE commits SET n = n + 1")
            with guard:
                finished[0] += 1
                worst[0] = max(worst[0], finished[0] - before - 1)

    run_threads([writer] * 8)
    with store.read() as tx:
        assert tx.one("SELECT n FROM commits") == {"n": 200}
    assert worst[0] <= 8, worst[0]
    store.close()
