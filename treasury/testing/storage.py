"""The storage conformance suite: what every `Storage` backend must get right.

Subclass `StorageSuite` in a test module and provide a ``storage`` fixture that yields a
fresh store (empty or already migrated, either works) and closes it afterwards::

    import pytest
    from treasury.testing.storage import StorageSuite

    class TestMyStorage(StorageSuite):
        @pytest.fixture
        def storage(self, tmp_path):
            store = MyStorage.from_url(...)
            yield store
            store.close()

The suite speaks only the portable SQL of `treasury.backends.storage.base` (``?``
placeholders, ``RETURNING``, ``ON CONFLICT``, partial indexes, ``{pk}``/``{blob}`` from
`Storage.types`), so it runs unchanged on any dialect. Scratch tables get unique names
and are dropped afterwards. `StorageSuite.test_close` closes the store itself, so the
fixture's own ``close()`` is then a second call, which must be harmless.
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from treasury._schema import MIGRATIONS, migrate
from treasury.backends.storage.base import DuplicateKey, Storage, Transaction

NOW = "2024-01-02T03:04:05.000000Z"
LATER = "2024-06-07T08:09:10.000000Z"
LATEST = MIGRATIONS[-1][0]
TABLES = sorted(
    {
        match.group(1)
        for _, _, statements in MIGRATIONS
        for statement in statements
        for match in [re.match(r"\s*CREATE TABLE (\w+)", statement)]
        if match
    }
)
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


def recorded_versions(storage: Storage) -> dict[int, dict[str, Any]]:
    """The rows of schema_migrations by version; {} when the table does not exist yet."""
    with storage.transaction() as tx:
        try:
            with storage.transaction() as probe:  # a savepoint: a failure leaves tx usable
                rows = probe.query("SELECT version, description, applied_at FROM schema_migrations")
        except Exception:  # no such table (yet)
            rows = []
        tx.query("SELECT 1 AS one")  # still usable after the failed savepoint
    return {row["version"]: row for row in rows}


class StorageSuite:
    """Conformance tests for a `Storage`; subclasses provide the ``storage`` fixture."""

    # -- fixtures ---------------------------------------------------------------------

    @pytest.fixture
    def table(self, storage: Storage) -> Iterator[str]:
        """A scratch table: id {pk}, k unique text, n integer, b {blob}, s text."""
        name = f"scratch_{uuid.uuid4().hex[:12]}"
        with storage.transaction() as tx:
            tx.execute(
                f"CREATE TABLE {name} (id {{pk}}, k TEXT NOT NULL UNIQUE, n INTEGER, "
                f"b {{blob}}, s TEXT)".format(**storage.types)
            )
        yield name
        with contextlib.suppress(Exception), storage.transaction() as tx:
            tx.execute(f"DROP TABLE IF EXISTS {name}")

    @pytest.fixture
    def migrated(self, storage: Storage) -> Storage:
        migrate(storage, now=NOW)
        return storage

    # -- helpers ----------------------------------------------------------------------

    @staticmethod
    def keys(storage: Storage, table: str) -> list[str]:
        with storage.read() as tx:
            return [row["k"] for row in tx.query(f"SELECT k FROM {table} ORDER BY k")]

    @staticmethod
    def insert(tx: Transaction, table: str, k: str, n: int | None = 0) -> int:
        return tx.execute(f"INSERT INTO {table} (k, n) VALUES (?, ?)", (k, n))

    @staticmethod
    def peek_from_other_thread(
        storage: Storage, table: str
    ) -> tuple[list[str] | None, threading.Thread]:
        """Keys a read on another thread sees within a moment, or None if it is waiting.

        A backend may make other threads wait for an open writer (one shared connection)
        instead of serving them a snapshot; waiting is fine, seeing dirty data is not.
        Join the returned thread once the writer is done.
        """
        out: queue.Queue[list[str]] = queue.Queue()
        thread = threading.Thread(
            target=lambda: out.put(StorageSuite.keys(storage, table)), daemon=True
        )
        thread.start()
        try:
            return out.get(timeout=0.3), thread
        except queue.Empty:
            return None, thread

    @staticmethod
    def insert_committed(storage: Storage, table: str, k: str) -> None:
        with storage.transaction() as tx:
            StorageSuite.insert(tx, table, k)

    # -- the interface ----------------------------------------------------------------

    def test_types_and_key_file(self, storage: Storage) -> None:
        assert {"pk", "blob", "clustered", "sortable_text"} <= set(storage.types)
        assert all(isinstance(v, str) and v for v in storage.types.values())
        assert storage.key_file is None or isinstance(storage.key_file, Path)

    # -- migrations -------------------------------------------------------------------

    def test_migrate_applies_every_migration_and_records_it(self, storage: Storage) -> None:
        before = recorded_versions(storage)
        assert migrate(storage, now=NOW) == LATEST
        after = recorded_versions(storage)
        assert sorted(after) == [number for number, _, _ in MIGRATIONS]
        for number, description, _ in MIGRATIONS:
            assert after[number]["description"] == description
            expected = before[number]["applied_at"] if number in before else NOW
            assert after[number]["applied_at"] == expected
            assert isinstance(after[number]["version"], int)
        with storage.read() as tx:
            for name in TABLES:  # every table exists and is queryable
                row = tx.one(f"SELECT COUNT(*) AS n FROM {name}")
                assert row is not None and isinstance(row["n"], int)

    def test_migrate_twice_is_a_no_op(self, storage: Storage) -> None:
        assert migrate(storage, now=NOW) == LATEST
        first = recorded_versions(storage)
        assert migrate(storage, now=LATER) == LATEST
        assert recorded_versions(storage) == first

    def test_concurrent_migrations_both_succeed(self, storage: Storage) -> None:
        results: list[int] = []
        run_threads([lambda: results.append(migrate(storage, now=NOW))] * 4)
        assert results == [LATEST] * 4
        versions = recorded_versions(storage)
        assert sorted(versions) == [number for number, _, _ in MIGRATIONS]
        with storage.transaction() as tx:  # the schema works: constraints included
            tx.execute(
                "INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)",
                ("org_1", "Acme", NOW),
            )
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.execute(
                    "INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)",
                    ("org_1", "Again", NOW),
                )
        with storage.read() as tx:
            assert tx.query("SELECT id, name FROM organizations") == [
                {"id": "org_1", "name": "Acme"}
            ]

    # -- commit and rollback ----------------------------------------------------------

    def test_committed_writes_are_visible_everywhere(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            assert self.insert(tx, table, "a") == 1
            assert self.insert(tx, table, "b") == 1
        assert self.keys(storage, table) == ["a", "b"]
        assert in_thread(lambda: self.keys(storage, table)) == ["a", "b"]

    def test_exception_rolls_back_everything(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "kept")
        error = Boom("abort")
        with pytest.raises(Boom) as caught, storage.transaction() as tx:
            self.insert(tx, table, "a")
            tx.execute(f"UPDATE {table} SET n = 99 WHERE k = ?", ("kept",))
            self.insert(tx, table, "b")
            raise error
        assert caught.value is error  # propagated unchanged
        assert self.keys(storage, table) == ["kept"]
        with storage.read() as r:
            assert r.one(f"SELECT n FROM {table} WHERE k = ?", ("kept",)) == {"n": 0}

    def test_base_exception_rolls_back_too(self, storage: Storage, table: str) -> None:
        with pytest.raises(Interrupt), storage.transaction() as tx:
            self.insert(tx, table, "a")
            raise Interrupt
        assert self.keys(storage, table) == []
        # the thread is back outside any transaction: the next one really commits
        with storage.transaction() as tx:
            self.insert(tx, table, "b")
        assert in_thread(lambda: self.keys(storage, table)) == ["b"]

    def test_transaction_after_failed_one_commits(self, storage: Storage, table: str) -> None:
        with pytest.raises(Boom), storage.transaction() as tx:
            self.insert(tx, table, "a")
            with storage.transaction() as inner:
                self.insert(inner, table, "b")
            raise Boom
        with storage.transaction() as tx:
            self.insert(tx, table, "c")
        assert in_thread(lambda: self.keys(storage, table)) == ["c"]

    def test_execute_returns_changed_row_count(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            for k in "abc":
                assert self.insert(tx, table, k) == 1
            assert tx.execute(f"UPDATE {table} SET n = n + 1 WHERE k <> ?", ("a",)) == 2
            assert tx.execute(f"UPDATE {table} SET n = 5 WHERE k = ?", ("zzz",)) == 0
            assert tx.execute(f"DELETE FROM {table}") == 3

    def test_read_on_a_thread_with_no_transaction(self, storage: Storage, table: str) -> None:
        with storage.read() as r:
            assert r.query(f"SELECT k FROM {table}") == []
        with pytest.raises(Boom), storage.read():
            raise Boom
        with storage.transaction() as tx:  # a failed read leaves the thread clean
            self.insert(tx, table, "a")
        assert in_thread(lambda: self.keys(storage, table)) == ["a"]

    # -- savepoints -------------------------------------------------------------------

    def test_nested_failure_rolls_back_only_the_inner_block(
        self, storage: Storage, table: str
    ) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "a")
            with pytest.raises(Boom), storage.transaction() as inner:
                self.insert(inner, table, "b")
                inner.execute(f"UPDATE {table} SET n = 7 WHERE k = ?", ("a",))
                raise Boom
            assert [r["k"] for r in tx.query(f"SELECT k FROM {table}")] == ["a"]
            self.insert(tx, table, "c")
        assert self.keys(storage, table) == ["a", "c"]
        with storage.read() as r:
            assert r.one(f"SELECT n FROM {table} WHERE k = ?", ("a",)) == {"n": 0}

    def test_nested_success_is_undone_by_outer_failure(self, storage: Storage, table: str) -> None:
        with pytest.raises(Boom), storage.transaction() as tx:
            self.insert(tx, table, "a")
            with storage.transaction() as inner:
                self.insert(inner, table, "b")
            seen, peeker = self.peek_from_other_thread(storage, table)
            assert seen in ([], None)
            raise Boom
        peeker.join(THREAD_TIMEOUT)
        assert self.keys(storage, table) == []

    def test_three_levels_deep(self, storage: Storage, table: str) -> None:
        with storage.transaction() as one:
            self.insert(one, table, "1")
            with storage.transaction() as two:
                self.insert(two, table, "2")
                with pytest.raises(Boom), storage.transaction() as three:
                    self.insert(three, table, "3")
                    raise Boom
                self.insert(two, table, "4")
                with storage.transaction() as three:  # a sibling after a failed savepoint
                    self.insert(three, table, "5")
                    with pytest.raises(Boom), storage.transaction() as four:
                        self.insert(four, table, "6")
                        raise Boom
            with pytest.raises(Boom), storage.transaction() as two:
                self.insert(two, table, "7")
                with storage.transaction() as three:
                    self.insert(three, table, "8")
                raise Boom
            self.insert(one, table, "9")
        assert self.keys(storage, table) == ["1", "2", "4", "5", "9"]

    # -- unique violations ------------------------------------------------------------

    def test_duplicate_key_from_execute(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "a")
        with pytest.raises(DuplicateKey), storage.transaction() as tx:
            self.insert(tx, table, "new")
            self.insert(tx, table, "a")
        assert self.keys(storage, table) == ["a"]  # the whole transaction rolled back

    def test_duplicate_primary_key(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            row = tx.one(f"INSERT INTO {table} (k) VALUES (?) RETURNING id", ("a",))
            assert row is not None
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.execute(f"INSERT INTO {table} (id, k) VALUES (?, ?)", (row["id"], "b"))

    def test_duplicate_key_from_returning(self, storage: Storage, table: str) -> None:
        sql = f"INSERT INTO {table} (k, n) VALUES (?, ?) RETURNING id, k"
        with storage.transaction() as tx:
            first = tx.query(sql, ("a", 1))
            assert len(first) == 1 and first[0]["k"] == "a"
            assert isinstance(first[0]["id"], int)
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.query(sql, ("a", 2))
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.one(sql, ("a", 3))
            second = tx.one(sql, ("b", 4))
            assert second is not None and second["id"] != first[0]["id"]
        with storage.read() as r:
            assert r.query(f"SELECT k, n FROM {table} ORDER BY k") == [
                {"k": "a", "n": 1},
                {"k": "b", "n": 4},
            ]

    def test_transaction_usable_after_duplicate_in_savepoint(
        self, storage: Storage, table: str
    ) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "a")
        with storage.transaction() as tx:
            self.insert(tx, table, "b")
            for _ in range(3):  # repeatedly: every savepoint is cleaned up
                with pytest.raises(DuplicateKey), storage.transaction() as inner:
                    self.insert(inner, table, "c")
                    self.insert(inner, table, "a")
            self.insert(tx, table, "d")
            assert [r["k"] for r in tx.query(f"SELECT k FROM {table} ORDER BY k")] == [
                "a",
                "b",
                "d",
            ]
        assert self.keys(storage, table) == ["a", "b", "d"]

    def test_partial_unique_index(self, migrated: Storage) -> None:
        storage = migrated
        wallet = (
            "INSERT INTO wallets (org_id, address, type, created_at, updated_at) "
            "VALUES (?, ?, 'tracked', ?, ?) RETURNING id"
        )
        args = ("org_1", "0xabc", NOW, NOW)
        with storage.transaction() as tx:
            tx.execute(
                "INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)",
                ("org_1", "Acme", NOW),
            )
            first = tx.one(wallet, args)
            assert first is not None
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.one(wallet, args)
            tx.execute("UPDATE wallets SET deleted_at = ? WHERE id = ?", (NOW, first["id"]))
            again = tx.one(wallet, args)  # the index only covers live rows
            assert again is not None and again["id"] != first["id"]
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.execute(
                    "INSERT INTO recipients (org_id, address, label, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)",
                    ("org_1", "0x1", "x", NOW, NOW, "org_1", "0x1", "y", NOW, NOW),
                )
        with storage.read() as r:
            assert r.one("SELECT COUNT(*) AS n FROM wallets") == {"n": 2}
            assert r.one("SELECT COUNT(*) AS n FROM recipients") == {"n": 0}

    def test_on_conflict_do_nothing_returning(self, storage: Storage, table: str) -> None:
        sql = f"INSERT INTO {table} (k, n) VALUES (?, ?) ON CONFLICT (k) DO NOTHING RETURNING id"
        with storage.transaction() as tx:
            created = tx.query(sql, ("a", 1))
            assert len(created) == 1 and isinstance(created[0]["id"], int)
            assert tx.query(sql, ("a", 2)) == []
            assert tx.one(sql, ("a", 3)) is None
            assert (
                tx.execute(
                    f"INSERT INTO {table} (k, n) VALUES (?, ?) ON CONFLICT (k) DO NOTHING", ("a", 4)
                )
                == 0
            )
        with storage.read() as r:
            assert r.query(f"SELECT k, n FROM {table}") == [{"k": "a", "n": 1}]

    def test_on_conflict_do_update_returning(self, storage: Storage, table: str) -> None:
        sql = (
            f"INSERT INTO {table} (k, n) VALUES (?, ?) "
            "ON CONFLICT (k) DO UPDATE SET n = excluded.n RETURNING id, n"
        )
        with storage.transaction() as tx:
            first = tx.one(sql, ("a", 1))
            second = tx.one(sql, ("a", 2))
        assert first is not None and second is not None
        assert second == {"id": first["id"], "n": 2}

    # -- values and rows --------------------------------------------------------------

    def test_rows_are_dicts_by_column_name(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            tx.execute(
                f"INSERT INTO {table} (k, n, s) VALUES (?, ?, ?), (?, ?, ?)",
                ("a", 1, "x", "b", 2, "y"),
            )
        with storage.read() as r:
            rows = r.query(f"SELECT k, n, s AS label FROM {table} ORDER BY k")
            assert rows == [{"k": "a", "n": 1, "label": "x"}, {"k": "b", "n": 2, "label": "y"}]
            assert all(type(row) is dict for row in rows)
            assert [list(row) for row in rows] == [["k", "n", "label"]] * 2  # column order
            assert r.query(f"SELECT k FROM {table} WHERE k = ?", ("none",)) == []
            assert r.one(f"SELECT k FROM {table} WHERE k = ?", ("none",)) is None
            assert r.one(f"SELECT k FROM {table} ORDER BY k DESC") == {"k": "b"}

    @pytest.mark.parametrize(
        "blob",
        [b"", b"\x00", b"\x00\xff\x00", bytes(range(256)), "é€😀".encode(), b"x" * 100_000],
        ids=["empty", "nul", "nul-ff", "all-bytes", "utf8", "100kB"],
    )
    def test_blobs_round_trip_exactly(self, storage: Storage, table: str, blob: bytes) -> None:
        with storage.transaction() as tx:
            tx.execute(f"INSERT INTO {table} (k, b) VALUES (?, ?)", ("a", blob))
            row = tx.one(f"SELECT b FROM {table} WHERE k = ?", ("a",))
            assert row is not None and type(row["b"]) is bytes and row["b"] == blob
        with storage.read() as r:
            row = r.one(f"SELECT b FROM {table} WHERE b = ?", (blob,))
            assert row is not None and type(row["b"]) is bytes and row["b"] == blob

    def test_nulls_integers_and_text_round_trip(self, storage: Storage, table: str) -> None:
        values = [0, 1, -1, 2**31 - 1, -(2**31)]  # the range of INTEGER in every dialect
        with storage.transaction() as tx:
            for i, n in enumerate(values):
                tx.execute(f"INSERT INTO {table} (k, n, s) VALUES (?, ?, ?)", (f"k{i}", n, "é"))
            tx.execute(
                f"INSERT INTO {table} (k, n, b, s) VALUES (?, ?, ?, ?)", ("z", None, None, None)
            )
        with storage.read() as r:
            rows = r.query(f"SELECT k, n, b, s FROM {table} ORDER BY id")
            assert [row["n"] for row in rows[:-1]] == values
            assert all(type(row["n"]) is int for row in rows[:-1])
            assert all(row["s"] == "é" for row in rows[:-1])
            assert rows[-1] == {"k": "z", "n": None, "b": None, "s": None}
            assert r.one(f"SELECT k FROM {table} WHERE n IS NULL") == {"k": "z"}
            ids = [row["id"] for row in r.query(f"SELECT id FROM {table} ORDER BY id")]
            assert all(type(i) is int for i in ids) and len(set(ids)) == len(ids)
            count = r.one(f"SELECT COUNT(*) AS n FROM {table}")
            assert count is not None and type(count["n"]) is int and count["n"] == 6

    def test_params_are_bound_not_interpolated(self, storage: Storage, table: str) -> None:
        tricky = "it's a '?' -- not; SQL"
        with storage.transaction() as tx:
            tx.execute(f"INSERT INTO {table} (k, s) VALUES (?, ?)", ("a", tricky))
        with storage.read() as r:
            assert r.one(f"SELECT s FROM {table} WHERE s = ?", (tricky,)) == {"s": tricky}

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
