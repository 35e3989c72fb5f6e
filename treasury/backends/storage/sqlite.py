"""SQLite storage on sqlite-utils: WAL, one connection per thread, durable commits.

``sqlite:///relative.db``, ``sqlite:////absolute/path.db`` or ``sqlite:///:memory:``.
Write transactions start with ``BEGIN IMMEDIATE`` so writers queue on the database
lock instead of failing on a lock upgrade; readers see WAL snapshots and never wait.
An in-memory database is one connection shared by every thread under a lock.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self
from urllib.parse import unquote, urlsplit

import sqlite_utils

from .base import DuplicateKey, Params, Row, Storage, Transaction

MEMORY = ":memory:"


class _Tx(Transaction):
    def __init__(self, db: sqlite_utils.Database):
        self._db = db

    def execute(self, sql: str, params: Params = ()) -> int:
        try:
            return int(self._db.execute(sql, _bind(params)).rowcount)
        except sqlite3.IntegrityError as error:
            raise _translate(error) from error

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        # Database.execute, not Database.query: the latter wraps each statement in a
        # savepoint, which doubles the statements of a write transaction.
        try:
            cursor = self._db.execute(sql, _bind(params))
            rows = cursor.fetchall()
        except sqlite3.IntegrityError as error:
            raise _translate(error) from error
        columns = [column[0] for column in cursor.description or ()]
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def lock(self, name: str) -> None:
        """Nothing to do: ``BEGIN IMMEDIATE`` already serialises every writer."""


def _bind(params: Params) -> Sequence[Any] | dict[str, Any]:
    return dict(params) if isinstance(params, Mapping) else params


def _translate(error: sqlite3.IntegrityError) -> Exception:
    return DuplicateKey(str(error)) if "UNIQUE" in str(error) else error


class SQLiteStorage(Storage):
    types = {
        "pk": "INTEGER PRIMARY KEY",  # rows are never hard-deleted, so ids never repeat
        "blob": "BLOB",
        "clustered": " WITHOUT ROWID",  # one B-tree, not a table and its key index
        "sortable_text": "TEXT",  # BINARY collation: code-point order
    }

    def __init__(self, path: str | Path = MEMORY, *, busy_timeout: float = 30.0):
        self.path = str(path)
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._all: list[sqlite_utils.Database] = []
        self._registry_lock = threading.Lock()
        self._shared: sqlite_utils.Database | None = None
        self._shared_lock = threading.RLock()
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

    def _connect(self) -> sqlite_utils.Database:
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        db = sqlite_utils.Database(conn)
        if self.path != MEMORY:
            db.enable_wal()
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        with self._registry_lock:
            self._all.append(db)
        return db

    def _db(self) -> sqlite_utils.Database:
        if self._shared is not None:
            return self._shared
        db: sqlite_utils.Database | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = self._connect()
            # Dropped with the thread's locals when the thread ends: close its connection.
            self._local.owner = owner = _ThreadOwner()
            weakref.finalize(owner, self._release, db).atexit = False
        return db

    def _release(self, db: sqlite_utils.Database) -> None:
        with self._registry_lock:
            if db in self._all:
                self._all.remove(db)
        db.conn.close()

    @contextmanager
    def _outermost(self, begin: str) -> Iterator[Transaction]:
        if self._shared is not None:
            self._shared_lock.acquire()
        try:
            db = self._db()
            conn = db.conn  # BEGIN/COMMIT straight on the connection: no wrapper per statement
            conn.execute(begin)
            self._local.tx = tx = _Tx(db)
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
            if self._shared is not None:
                self._shared_lock.release()

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        depth: int = getattr(self._local, "depth", 0)
        if depth == 0:
            with self._outermost("BEGIN IMMEDIATE") as tx:
                yield tx
            return
        tx = self._local.tx
        name = f"sp{depth}"
        tx.execute(f"SAVEPOINT {name}")
        self._local.depth = depth + 1
        try:
            yield tx
        except BaseException:
            tx.execute(f"ROLLBACK TO {name}")
            tx.execute(f"RELEASE {name}")
            raise
        else:
            tx.execute(f"RELEASE {name}")
        finally:
            self._local.depth = depth

    @contextmanager
    def read(self) -> Iterator[Transaction]:
        if getattr(self._local, "depth", 0):
            yield self._local.tx
            return
        with self._outermost("BEGIN") as tx:
            yield tx

    def close(self) -> None:
        with self._registry_lock:
            for db in self._all:
                db.conn.close()
            self._all.clear()
        self._local = threading.local()


class _ThreadOwner:
    """Held only by one thread's locals; its finalizer closes that thread's connection."""
