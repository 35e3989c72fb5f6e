"""`StorageConcurrency`: `StorageSuite`'s tests of threads and of `Storage.close`."""

from __future__ import annotations

import threading
import time

import pytest

from treasury.backends.storage.base import Storage
from treasury.testing._storage_base import StorageBase
from treasury.testing._support import THREAD_TIMEOUT, Boom, in_thread, run_threads


class StorageConcurrency(StorageBase):
    """Writers and readers on many threads; closing the store."""

    # -- threads ----------------------------------------------------------------------

    def test_no_lost_updates_under_lock(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "counter", 0)

        def work() -> None:
            for _ in range(50):
                with storage.transaction() as tx:
                    tx.lock("counter")
                    row = tx.one(f"SELECT n FROM {table} WHERE k = ?", ("counter",))
                    assert row is not None
                    tx.execute(f"UPDATE {table} SET n = ? WHERE k = ?", (row["n"] + 1, "counter"))

        run_threads([work] * 8)
        with storage.read() as r:
            assert r.one(f"SELECT n FROM {table} WHERE k = ?", ("counter",)) == {"n": 400}

    def test_readers_never_see_half_a_transaction(self, storage: Storage, table: str) -> None:
        total = 1000
        with storage.transaction() as tx:
            self.insert(tx, table, "a", total)
            self.insert(tx, table, "b", 0)
        done = threading.Event()
        seen: list[int] = []

        def writer() -> None:
            try:
                for i in range(60):
                    with storage.transaction() as tx:
                        tx.lock("pair")
                        amount = i % 7 + 1
                        tx.execute(f"UPDATE {table} SET n = n - ? WHERE k = ?", (amount, "a"))
                        time.sleep(0.001)  # widen the window between the two halves
                        tx.execute(f"UPDATE {table} SET n = n + ? WHERE k = ?", (amount, "b"))
            finally:
                done.set()

        def reader() -> None:
            while not done.is_set() or not seen:
                with storage.read() as r:  # two statements: one snapshot
                    a = r.one(f"SELECT n FROM {table} WHERE k = ?", ("a",))
                    time.sleep(0.0005)
                    b = r.one(f"SELECT n FROM {table} WHERE k = ?", ("b",))
                assert a is not None and b is not None
                seen.append(a["n"] + b["n"])

        run_threads([writer, reader, reader, reader])
        assert seen and set(seen) == {total}
        with storage.read() as r:
            assert r.one(f"SELECT n FROM {table} WHERE k = ?", ("b",)) == {
                "n": sum(i % 7 + 1 for i in range(60))
            }

    def test_read_inside_transaction_sees_its_writes(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "a")
            with storage.read() as r:
                assert [row["k"] for row in r.query(f"SELECT k FROM {table}")] == ["a"]
            with storage.transaction() as inner:
                self.insert(inner, table, "b")
                with storage.read() as r:
                    assert len(r.query(f"SELECT k FROM {table}")) == 2
            # other threads see nothing uncommitted (or wait until the commit)
            seen, peeker = self.peek_from_other_thread(storage, table)
            assert seen in ([], None)
        peeker.join(THREAD_TIMEOUT)
        assert self.keys(storage, table) == ["a", "b"]

    def test_transactions_are_per_thread(self, storage: Storage, table: str) -> None:
        """Another thread's transaction is its own, not a savepoint of this thread's."""
        failed = threading.Event()

        def other() -> None:
            with pytest.raises(Boom), storage.transaction() as tx:
                self.insert(tx, table, "other")
                raise Boom
            failed.set()

        with storage.transaction() as tx:
            self.insert(tx, table, "mine")
            thread = threading.Thread(target=other, daemon=True)
            thread.start()
            failed.wait(0.3)  # a backend may make it wait for this commit
        thread.join(THREAD_TIMEOUT)
        assert failed.is_set()
        assert self.keys(storage, table) == ["mine"]
        # and this thread's failure does not touch another thread's committed work
        in_thread(lambda: self.insert_committed(storage, table, "theirs"))
        with pytest.raises(Boom), storage.transaction() as tx:
            self.insert(tx, table, "lost")
            raise Boom
        assert self.keys(storage, table) == ["mine", "theirs"]

    # -- close ------------------------------------------------------------------------

    def test_close(self, storage: Storage, table: str) -> None:
        """close() releases connections of every thread; the fixture may call it again."""
        self.insert_committed(storage, table, "a")
        assert in_thread(lambda: self.keys(storage, table)) == ["a"]
        storage.close()
        storage.close()  # a second call is harmless
        # afterwards the store is unusable (an error, not a hang) or works again
        try:
            with storage.read() as r:
                result = r.query("SELECT 1 AS one")
        except Exception:
            result = None
        assert result in (None, [{"one": 1}])
