"""The SQLite storage backend: the conformance suite on a file and in memory, plus SQLite specifics."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from treasury.backends.storage.sqlite import SQLiteStorage
from treasury.testing.storage import StorageSuite

pytestmark = pytest.mark.sqlite_only  # the SQLite backend itself


class TestSQLiteFile(StorageSuite):
    @pytest.fixture
    def storage(self, tmp_path: Path) -> Iterator[SQLiteStorage]:
        store = SQLiteStorage(tmp_path / "t.db")
        yield store
        store.close()

    def test_wal_and_full_sync(self, storage: SQLiteStorage) -> None:
        with storage.read() as r:
            assert r.one("PRAGMA journal_mode") == {"journal_mode": "wal"}
            assert r.one("PRAGMA synchronous") == {"synchronous": 2}
            assert r.one("PRAGMA foreign_keys") == {"foreign_keys": 1}

    def test_key_file_beside_the_database(self, tmp_path: Path, storage: SQLiteStorage) -> None:
        assert storage.key_file == tmp_path / "t.db.key"

    def test_connections_of_finished_threads_are_closed(self, storage: SQLiteStorage) -> None:
        """A thread-per-request server must not leak a connection (and its files) per thread."""

        def work() -> None:
            with storage.read() as r:
                r.query("SELECT 1 AS one")

        for _ in range(50):
            thread = threading.Thread(target=work)
            thread.start()
            thread.join(10)
        deadline = time.monotonic() + 5
        while len(storage._all) > 1 and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.01)
        assert len(storage._all) <= 1
        work()  # the storage itself still works

    def test_data_survives_reopening(self, tmp_path: Path, storage: SQLiteStorage) -> None:
        with storage.transaction() as tx:
            tx.execute("CREATE TABLE t (k TEXT)")
            tx.execute("INSERT INTO t (k) VALUES (?)", ("a",))
        storage.close()
        again = SQLiteStorage(tmp_path / "t.db")
        try:
            with again.read() as r:
                assert r.query("SELECT k FROM t") == [{"k": "a"}]
        finally:
            again.close()


class TestSQLiteMemory(StorageSuite):
    @pytest.fixture
    def storage(self) -> Iterator[SQLiteStorage]:
        store = SQLiteStorage(":memory:")
        yield store
        store.close()

    def test_no_key_file(self, storage: SQLiteStorage) -> None:
        assert storage.key_file is None

    def test_one_database_for_every_thread(self, storage: SQLiteStorage) -> None:
        with storage.transaction() as tx:
            tx.execute("CREATE TABLE t (k TEXT)")
        thread = threading.Thread(target=lambda: _insert(storage, "from-thread"))
        thread.start()
        thread.join(10)
        with storage.read() as r:
            assert r.query("SELECT k FROM t") == [{"k": "from-thread"}]


def _insert(storage: SQLiteStorage, k: str) -> None:
    with storage.transaction() as tx:
        tx.execute("INSERT INTO t (k) VALUES (?)", (k,))


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///rel.db", "rel.db"),
        ("sqlite:///dir/rel.db", "dir/rel.db"),
        ("sqlite:////abs/x.db", "/abs/x.db"),
        ("sqlite:///:memory:", ":memory:"),
        ("sqlite://", ":memory:"),
        ("sqlite:///with%20space.db", "with space.db"),
    ],
)
def test_from_url(url: str, path: str) -> None:
    store = SQLiteStorage.from_url(url)
    try:
        assert store.path == path
    finally:
        store.close()


def test_from_url_memory_has_no_key_file() -> None:
    store = SQLiteStorage.from_url("sqlite:///:memory:")
    try:
        assert store.key_file is None
    finally:
        store.close()


def test_from_url_key_file() -> None:
    store = SQLiteStorage.from_url("sqlite:////abs/x.db")
    assert store.key_file == Path("/abs/x.db.key")  # no connection is opened for a file


@pytest.mark.parametrize("url", ["sqlite://host/x.db", "sqlite://localhost/x.db"])
def test_from_url_rejects_a_host(url: str) -> None:
    with pytest.raises(ValueError, match="host"):
        SQLiteStorage.from_url(url)
