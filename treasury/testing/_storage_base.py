"""`StorageBase`: the fixtures and helpers of `StorageSuite`'s test mixins."""

from __future__ import annotations

import contextlib
import queue
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from treasury._infra.schema import MIGRATIONS, migrate
from treasury.backends.storage.base import Storage, Transaction

NOW = "2024-01-02T03:04:05.000000Z"
LATER = "2024-06-07T08:09:10.000000Z"
LATEST = MIGRATIONS[-1][0]


def _final_tables() -> list[str]:
    """The tables the migrations leave: created, less dropped, renamed as renamed."""
    tables: set[str] = set()
    for _, _, statements in MIGRATIONS:
        for statement in statements:
            if created := re.match(r"\s*CREATE TABLE (\w+)", statement):
                tables.add(created.group(1))
            elif dropped := re.match(r"\s*DROP TABLE (\w+)", statement):
                tables.discard(dropped.group(1))
            elif renamed := re.match(r"\s*ALTER TABLE (\w+) RENAME TO (\w+)", statement):
                tables.discard(renamed.group(1))
                tables.add(renamed.group(2))
    return sorted(tables)


TABLES = _final_tables()


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


class StorageBase:
    """The ``table`` and ``migrated`` fixtures and the helpers of the storage tests."""

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
            target=lambda: out.put(StorageBase.keys(storage, table)), daemon=True
        )
        thread.start()
        try:
            return out.get(timeout=0.3), thread
        except queue.Empty:
            return None, thread

    @staticmethod
    def insert_committed(storage: Storage, table: str, k: str) -> None:
        with storage.transaction() as tx:
            StorageBase.insert(tx, table, k)
