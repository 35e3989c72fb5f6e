"""SQLite storage on the standard library's sqlite3: WAL, one connection per thread, durable commits.

``sqlite:///relative.db``, ``sqlite:////absolute/path.db`` or ``sqlite:///:memory:``.
Write transactions start with ``BEGIN IMMEDIATE`` so writers queue on the database
lock instead of failing on a lock upgrade; readers see WAL snapshots and never wait.
An in-memory database is one connection shared by every thread under a lock.

Writers of one process queue in order on an in-process lock taken before ``BEGIN
IMMEDIATE`` (a fair queue: without it they poll SQLite's lock with sleeps, and the
slowest waits for up to a second); writers of other processes still queue on SQLite's
lock. A new database file is created 0600, and SQLite gives its WAL and shared-memory
files the same mode.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self
from urllib.parse import unquote, urlsplit

from .base import DuplicateKey, Params, Row, ThreadTransactions, Transaction

MEMORY = ":memory:"


class _Tx(Transaction):
    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    def _execute(self, sql: str, params: Params) -> int:
        try:
            return int(self._conn.execute(sql, params).rowcount)
        except sqlite3.IntegrityError as error:
            raise _translate(error) from error

    def _query(self, sql: str, params: Params) -> list[Row]:
        try:
            cursor = self._conn.execute(sql, params)
            rows = cursor.fetchall()
        except sqlite3.IntegrityError as error:
            raise _translate(error) from error
        columns = [column[0] for column in cursor.description or ()]
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def _stream(self, sql: str, params: Params, size: int) -> Iterator[list[Row]]:
        cursor = self._conn.execute(sql, params)  # steps through the result as fetched
        columns = [column[0] for column in cursor.description or ()]
        while rows := cursor.fetchmany(size):
            yield [dict(zip(columns, row, strict=True)) for row in rows]

    def lock(self, name: str) -> None:
        """Nothing to do: ``BEGIN IMMEDIATE`` already serialises every writer."""


def _translate(error: sqlite3.IntegrityError) -> Exception:
    text = str(error)  # "UNIQUE constraint failed: table.column, ..."
    if "UNIQUE" not in text:
        return error
    return DuplicateKey(text, text.partition(": ")[2].partition(".")[0] or None)


def _sha256_hex(text: str) -> str:
    """The SQL function ``sha256_hex`` (`Storage.types`), defined on every connection."""
    return hashlib.sha256(text.encode()).hexdigest()


class SQLiteStorage(ThreadTransactions):
    begin_write = "BEGIN IMMEDIATE"
    begin_read = "BEGIN"
    types = {
        "pk": "INTEGER PRIMARY KEY",  # rows are never hard-deleted, so ids never repeat
        "blob": "BLOB",
        "clustered": " WITHOUT ROWID",  # one B-tree, not a table and its key index
        "sortable_text": "TEXT",  # BINARY collation: code-point order
        "define_sha256_hex": "",  # on each connection (`_connect`)
    }

    def __init__(self, path: str | Path = MEMORY, *, busy_timeout: float = 30.0):
        self.path = str(path)
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._registry_lock = threading.Lock()
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        self._writers = FairLock()
        if self.path == MEMORY:
            self._shared = self._connect()

    @classmethod
    def from_url(cls, url: str) -> Self:
        parts = urlsplit(url)
        path = unquote(parts.path)
        if parts.netloc:
            raise ValueError(f"sqlite URL takes no host: {url!r} (use sqlite:///file.db)")
        path = path[1:] if path.startswith("/") else path
        return cls(path or MEMORY)

    @property
    def key_file(self) -> Path | None:
        return None if self.path == MEMORY else Path(self.path + ".key")

    @property
    def durable(self) -> bool:
        return self.path != MEMORY

    def _connect(self) -> sqlite3.Connection:
        if self.path != MEMORY and not os.path.exists(self.path):  # private from the start
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        if self.path != MEMORY:
            _enable_wal(conn, self._busy_timeout)
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.create_function("sha256_hex", 1, _sha256_hex, deterministic=True)
        with self._registry_lock:
            self._all.append(conn)
        return conn

    def _db(self) -> sqlite3.Connection:
        if self._shared is not None:
            return self._shared
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
            # Dropped with the thread's locals when the thread ends: close its connection.
            self._local.owner = owner = _ThreadOwner()
            weakref.finalize(owner, self._release, conn).atexit = False
        return conn

    def _release(self, conn: sqlite3.Connection) -> None:
        with self._registry_lock:
            if conn in self._all:
                self._all.remove(conn)
        conn.close()

    @contextmanager
    def _outermost(self, begin: str) -> Iterator[Transaction]:
        queue: threading.RLock | FairLock | None = None
        if self._shared is not None:
            queue = self._shared_lock
        elif begin == self.begin_write:
            queue = self._writers
        if queue is not None:
            queue.acquire()
        try:
            conn = self._db()
            conn.execute(begin)
            self._local.tx = tx = _Tx(conn)
            self._local.depth = 1
            try:
                yield tx
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                self._local.tx = None
                self._local.depth = 0
        finally:
            if queue is not None:
                queue.release()

    def _one_alone(self, sql: str, params: Params) -> Row | None:
        if self._shared is not None:  # the in-memory database's one connection, locked
            return super()._one_alone(sql, params)
        # In autocommit, the one statement is its own snapshot: no BEGIN, no COMMIT.
        return _Tx(self._db()).one(sql, params)

    def close(self) -> None:
        with self._registry_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


class _ThreadOwner:
    """Held only by one thread's locals; its finalizer closes that thread's connection."""


class FairLock:
    """A lock granted in the order it was asked for (`threading.Lock` wakes any waiter)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiting: deque[threading.Lock] = deque()
        self._held = False

    def acquire(self) -> None:
        with self._guard:
            if not self._held:
                self._held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiting.append(turn)
        turn.acquire()  # released by the holder before us: the lock is handed over

    def release(self) -> None:
        with self._guard:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._held = False

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


def _enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch a file to WAL (a no-op once it is). The switch takes an exclusive lock, and
    SQLite answers "database is locked" at once, without its busy handler, while another
    process opens the same new file: wait for it as a busy timeout would."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
