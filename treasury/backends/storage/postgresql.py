"""``postgresql://user@host/db``: PostgreSQL through psycopg 3 and a connection pool.

Several processes (API servers, workers) share one database. A write transaction runs
at READ COMMITTED on one pooled connection, nested blocks as savepoints; a named lock
(`Transaction.lock`) is an advisory lock held to the end of the transaction; a unique
violation becomes `DuplicateKey` at this boundary; `read` is a REPEATABLE READ, READ ONLY
snapshot (it joins the thread's open transaction, if any). The library's statements are
rewritten once each for psycopg's ``%s`` paramstyle by the storage base.

Pool size with ``?pool_min=1&pool_max=10``; any other query parameter (``options``,
``sslmode``, ...) goes to libpq as is. Install with the ``postgres`` extra.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from .base import DuplicateKey, Params, Row, ThreadTransactions, Transaction

__all__ = ["PostgresStorage"]

_STREAMS = itertools.count()  # names of server-side cursors, unique in the process


class _Tx(Transaction):
    """One transaction's cursor. Its opening ``BEGIN``, its named locks and its writes
    sent with `send`, whose answers nobody reads, wait in `_queued` and go with its next
    statement, or its COMMIT, in one query message (one round trip for all of them, their
    values bound by psycopg on this side); the server runs them in order, so each lock is
    held before that statement runs. A transaction that sent no statement never began:
    its end costs nothing."""

    paramstyle = "format"
    skip_locked = " FOR UPDATE SKIP LOCKED"

    def __init__(self, conn: psycopg.Connection[Row]) -> None:
        self._conn = conn
        self._cursor = conn.cursor()  # one per transaction: its statements run one by one
        self._queued: list[tuple[str, Params]] = []
        self.began = False  # whether a statement reached the server
        self._writes = False  # whether a write waits in `_queued`

    def _execute(self, sql: str, params: Params) -> int:
        return self._sent(sql, params).rowcount

    def _query(self, sql: str, params: Params) -> list[Row]:
        cursor = self._sent(sql, params)
        return cursor.fetchall() if cursor.description else []

    def _stream(self, sql: str, params: Params, size: int) -> Iterator[list[Row]]:
        """From a server-side cursor of this transaction, `size` rows per round trip."""
        name = f"treasury_stream_{next(_STREAMS)}"
        if self._queued:
            self._sent(*self._queued.pop())  # the queued BEGIN (and locks) first
        with self._translated(), self._conn.cursor(name, row_factory=dict_row) as rows:
            rows.execute(sql, params)
            while chunk := rows.fetchmany(size):
                yield chunk

    def _sent(self, sql: str, params: Params) -> psycopg.Cursor[Row]:
        """Run a statement, after the queued ones, in one round trip; its answer."""
        queued = self._take_queued()
        with self._translated():
            if not queued:
                return self._cursor.execute(sql, params)
            return self._together([*queued, (sql, params)])

    def _together(self, statements: list[tuple[str, Params]]) -> psycopg.Cursor[Row]:
        """Statements in one query message; the answer of the last."""
        bound = psycopg.ClientCursor(self._conn)
        text = "; ".join(bound.mogrify(*each) for each in statements)
        cursor = self._cursor.execute(text.encode(), prepare=False)
        while cursor.nextset():  # to the last statement's answer
            pass
        return cursor

    def _take_queued(self) -> list[tuple[str, Params]]:
        queued, self._queued, self.began, self._writes = self._queued, [], True, False
        return queued

    def queue(self, sql: str, params: Params = ()) -> None:
        """A statement whose answer is not read, sent with the next one."""
        self._queued.append((sql, params))

    def send(self, sql: str, params: Params = ()) -> None:
        self.queue(self._spelled(sql), params)
        self._writes = True

    def end(self, sql: str) -> None:
        """COMMIT (with the writes still queued) or ROLLBACK, if the transaction began;
        locks still queued are moot."""
        if sql == "COMMIT" and self._writes:
            try:
                with self._translated():
                    self._together([*self._take_queued(), (sql, ())])
            except BaseException:
                self._cursor.execute("ROLLBACK")  # the message stopped at its failure
                raise
            return
        self._queued = []
        if self.began:
            self._cursor.execute(sql)

    def lock(self, name: str) -> None:
        self.queue("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except psycopg.errors.UniqueViolation as error:
            raise DuplicateKey(str(error), error.diag.table_name) from error


class PostgresStorage(ThreadTransactions):
    begin_write = "BEGIN ISOLATION LEVEL READ COMMITTED"
    begin_read = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    types = {
        "pk": "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        "blob": "BYTEA",
        "clustered": "",
        "sortable_text": 'TEXT COLLATE "C"',  # code-point order, as SQLite's BINARY
        "define_sha256_hex": "CREATE OR REPLACE FUNCTION sha256_hex(value TEXT) RETURNS TEXT"
        " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE"
        " AS $$ SELECT encode(sha256(convert_to(value, 'UTF8')), 'hex') $$",
    }

    def __init__(
        self,
        conninfo: str,
        *,
        pool_min: int = 1,
        pool_max: int = 10,
        connection_class: type[psycopg.Connection[Any]] = psycopg.Connection,
    ) -> None:
        """`connection_class`: the pool's connections' class (a subclass may observe them)."""
        self._conninfo = conninfo
        self._pool = ConnectionPool(
            conninfo,
            connection_class=connection_class,
            min_size=pool_min,
            max_size=pool_max,
            kwargs={"row_factory": dict_row, "autocommit": True},
            open=True,
        )
        self._local = threading.local()

    @classmethod
    def from_url(cls, url: str) -> Self:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        sizes: dict[str, Any] = {
            name: int(query.pop(name)) for name in ("pool_min", "pool_max") if name in query
        }
        conninfo = urlunsplit(
            parts._replace(scheme="postgresql", query=urlencode(query, quote_via=quote))
        )
        return cls(conninfo, **sizes)

    @contextmanager
    def _outermost(self, begin: str) -> Iterator[Transaction]:
        with self._pool.connection() as conn:
            tx = _Tx(conn)  # rows are dicts (dict_row)
            tx.queue(begin)
            self._local.tx, self._local.depth = tx, 1
            try:
                yield tx
            except BaseException:
                tx.end("ROLLBACK")
                raise
            else:
                tx.end("COMMIT")
            finally:
                self._local.tx, self._local.depth = None, 0

    def _one_alone(self, sql: str, params: Params) -> Row | None:
        with self._pool.connection() as conn:  # autocommit: the statement is its snapshot
            return _Tx(conn).one(sql, params)

    def close(self) -> None:
        self._pool.close()

    def __repr__(self) -> str:
        parts = urlsplit(self._conninfo)  # never the password
        host = parts.hostname or ""
        return f"<PostgresStorage {parts.username or ''}@{host}{parts.path}>"
