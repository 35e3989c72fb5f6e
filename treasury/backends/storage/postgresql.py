"""``postgresql://user@host/db``: PostgreSQL through psycopg 3 and a connection pool.

Several processes (API servers, workers) share one database. A write transaction runs
at READ COMMITTED on one pooled connection, nested blocks as savepoints; a named lock
(`Transaction.lock`) is an advisory lock held to the end of the transaction; a unique
violation becomes `DuplicateKey` at this boundary; `read` is a REPEATABLE READ, READ ONLY
snapshot (it joins the thread's open transaction, if any). The library's statements are
rewritten once each for psycopg's ``%s`` paramstyle by the storage base.

Each parameterised INSERT, UPDATE, DELETE, SELECT or WITH is parsed and planned once per
connection: the connection prepares it (``PREPARE treasury_N``) the first time it meets
it, then sends ``EXECUTE treasury_N(values)`` (`_Prepared`). The connections' own
automatic preparation (psycopg's ``prepare_threshold``) is off: its ``DEALLOCATE ALL``,
sent after a rollback or DDL, would drop these statements unseen. Behind a pooler that
hands each transaction another server session (PgBouncer's transaction mode), add
``?prepare=off``: every statement then goes as text.

Pool size with ``?pool_min=1&pool_max=10``; any other query parameter (``options``,
``sslmode``, ...) goes to libpq as is. Install with the ``postgres`` extra.
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from .base import DuplicateKey, Params, Row, ThreadTransactions, Transaction

__all__ = ["PostgresStorage"]

_STREAMS = itertools.count()  # names of server-side cursors, unique in the process
_NAMES = itertools.count(1)  # names of prepared statements, unique in the process

#: Prepared when they carry parameters; `_WHOLE_ROWS` not (``SELECT *``, ``RETURNING *``:
#: a column added would change their answer's type, which a prepared statement refuses).
_PREPARED = re.compile(r"\s*(?:INSERT|UPDATE|DELETE|SELECT|WITH)\b", re.IGNORECASE)
_WHOLE_ROWS = re.compile(r"\*\s*(?:,|FROM\b|$)", re.IGNORECASE)
_MARKS = re.compile(r"%[s%]")
#: Parameter types PostgreSQL cannot infer (``? IS NULL``): such a statement stays text.
_NOT_PREPARABLE = {"42P18", "42P08"}


class _Prepared(OrderedDict[str, str | None]):
    """The statements one connection prepared, by text: each one's name, or None where
    PostgreSQL cannot prepare it; least recently used first. At most `limit` (the library
    has fewer distinct statements, but ``IN (?, ?, …)`` lists make one per length): the
    oldest is deallocated to make room. A failed transaction does not undo a PREPARE
    (prepared statements are not transactional), and a message holds none (`_Tx._name`):
    the entries stay true whatever the transactions do. Names that went stale (a column's
    type changed under a statement, `_Tx._together`) wait in `stale` to be deallocated."""

    limit = 256

    def __init__(self) -> None:
        super().__init__()
        self.stale: list[str] = []


class _Kept:
    """What a connection keeps for its transactions, one after another (a pooled
    connection serves one thread at a time): the statements it prepared, the cursor
    that runs its messages, and the one that writes values into them (`mogrify`). A
    cursor costs more to make than a message's values to write."""

    def __init__(self, conn: psycopg.Connection[Row]) -> None:
        self.prepared = _Prepared()
        self.cursor = conn.cursor()
        self.binder = psycopg.ClientCursor(conn)

    @staticmethod
    def of(conn: psycopg.Connection[Row]) -> _Kept:
        """`conn`'s, kept on the connection (a new connection has prepared nothing)."""
        kept: _Kept | None = vars(conn).get("treasury_kept")
        if kept is None:
            kept = vars(conn)["treasury_kept"] = _Kept(conn)
        return kept


@functools.lru_cache(maxsize=1024)
def _preparable(sql: str) -> bool:
    """Whether `sql` is a statement to prepare (`_PREPARED`, not `_WHOLE_ROWS`); the
    library's statements are a few hundred texts, each tested once."""
    return bool(_PREPARED.match(sql)) and not _WHOLE_ROWS.search(sql)


@functools.lru_cache(maxsize=1024)
def _execute(name: str, count: int) -> str:
    """``EXECUTE name(%s, …)`` with `count` values."""
    return f"EXECUTE {name}({', '.join(['%s'] * count)})"


def _numbered(sql: str) -> str:
    """`sql` (``%s`` paramstyle) as PREPARE takes it: ``$1``, ``$2``, … and a single ``%``."""
    numbers = itertools.count(1)
    return _MARKS.sub(lambda mark: "%" if mark[0] == "%%" else f"${next(numbers)}", sql)


class _Tx(Transaction):
    """One transaction's cursor. Its opening ``BEGIN``, its named locks and its writes
    sent with `send`, whose answers nobody reads, wait in `_queued` and go with its next
    statement, or its COMMIT, in one query message (one round trip for all of them, their
    values written into it by psycopg on this side, `_together`); the server runs them in
    order, so each lock is held before that statement runs. A transaction that sent no
    statement never began: its end costs nothing."""

    paramstyle = "format"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    concurrent = True

    def __init__(self, conn: psycopg.Connection[Row], prepare: bool = True) -> None:
        self._conn = conn
        self._prepare = prepare  # whether statements are prepared (`_name`)
        kept = _Kept.of(conn)  # its statements run one by one, on the connection's cursor
        self._cursor, self._binder, self._prepared = kept.cursor, kept.binder, kept.prepared
        self._queued: list[tuple[str, Params]] = []
        self.began = False  # whether a statement reached the server
        self._writes = False  # whether a write waits in `_queued`

    def _execute(self, sql: str, params: Params) -> int:
        return self._sent(sql, params).rowcount

    def _query(self, sql: str, params: Params) -> list[Row]:
        cursor = self._sent(sql, params)
        answer = cursor.pgresult  # its status says whether rows came (`description` costs more)
        return cursor.fetchall() if answer and answer.status == ExecStatus.TUPLES_OK else []

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
            return self._together([*queued, (sql, params)])

    def _together(self, statements: list[tuple[str, Params]]) -> psycopg.Cursor[Row]:
        """Statements in one query message, each that PostgreSQL can prepare as ``EXECUTE``
        of the connection's prepared statement (`_name`); the answer of the last. Their
        values are written into the message in one pass over all of them (a pass per
        statement cost more), so a statement given too many or too few values fails
        only when the whole message's count is off: SQLite, which checks each one, is
        where the library's statements are held to theirs."""
        executed = [self._executed(*each) for each in statements]
        text = "; ".join(sql for sql, _ in executed)
        values = [value for _, params in executed for value in params]
        try:
            cursor = self._cursor.execute(
                self._binder.mogrify(text, values).encode(), prepare=False
            )
        except psycopg.errors.FeatureNotSupported:  # "cached plan must not change result type"
            prepared = self._prepared  # a column's type changed: prepare them anew next time
            prepared.stale += filter(None, (prepared.pop(sql, None) for sql, _ in statements))
            raise
        while cursor.nextset():  # to the last statement's answer
            pass
        return cursor

    def _executed(self, sql: str, params: Params) -> tuple[str, Params]:
        """`sql` as sent: ``EXECUTE name(%s, …)`` where the connection prepared it."""
        if not params or not _preparable(sql) or (name := self._name(sql)) is None:
            return sql, params
        return _execute(name, len(params)), params

    def _name(self, sql: str) -> str | None:
        """The name under which the connection prepared `sql`; the first time, prepared
        now, in a message of its own (inside a savepoint within a transaction), so a
        statement that does not prepare fails nothing: None, and it goes as text."""
        if not self._prepare:
            return None
        prepared = self._prepared
        if sql in prepared:
            prepared.move_to_end(sql)
            return prepared[sql]
        state = self._conn.info.transaction_status
        if state not in (TransactionStatus.IDLE, TransactionStatus.INTRANS):
            return None  # a failed transaction: the message fails anyway
        if len(prepared) >= prepared.limit:
            _, oldest = prepared.popitem(last=False)
            prepared.stale += [oldest] if oldest else []
        name = f"treasury_{next(_NAMES)}"
        steps = [f"DEALLOCATE {old}" for old in prepared.stale]
        steps.append(f"PREPARE {name} AS {_numbered(sql)}")
        prepared.stale = []  # deallocated before the PREPARE runs, whether or not it fails
        inside = state == TransactionStatus.INTRANS
        if inside:
            steps = ["SAVEPOINT treasury_prepare", *steps, "RELEASE SAVEPOINT treasury_prepare"]
        try:
            self._cursor.execute("; ".join(steps).encode(), prepare=False)
        except psycopg.DatabaseError as error:
            if inside:
                self._cursor.execute(
                    b"ROLLBACK TO SAVEPOINT treasury_prepare; RELEASE SAVEPOINT treasury_prepare",
                    prepare=False,
                )
            if error.sqlstate in _NOT_PREPARABLE:
                prepared[sql] = None
            return None  # any other failure (no such table yet): text, and tried again
        prepared[sql] = name
        return name

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

    def ahead(self, sql: str, params: Params = ()) -> bool:
        if self.began:
            return False
        self._queued[:0] = [("BEGIN", ()), (self._spelled(sql), params), ("COMMIT", ())]
        return True

    def lock(self, name: str) -> None:
        self.queue("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except psycopg.errors.UniqueViolation as error:
            raise DuplicateKey(str(error), error.diag.table_name) from error


_SWITCH = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


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
        prepare: bool = True,
        connection_class: type[psycopg.Connection[Any]] = psycopg.Connection,
    ) -> None:
        """`prepare`: whether statements are prepared once per connection (off behind a
        transaction-mode pooler); `connection_class`: the pool's connections' class (a
        subclass may observe them)."""
        self._conninfo = conninfo
        self._prepare = prepare
        self._pool = ConnectionPool(
            conninfo,
            connection_class=connection_class,
            min_size=pool_min,
            max_size=pool_max,
            kwargs={"row_factory": dict_row, "autocommit": True, "prepare_threshold": None},
            open=True,
        )
        self._local = threading.local()

    @classmethod
    def from_url(cls, url: str) -> Self:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        options: dict[str, Any] = {
            name: int(query.pop(name)) for name in ("pool_min", "pool_max") if name in query
        }
        if "prepare" in query:
            value = query.pop("prepare").lower()
            if value not in _SWITCH:
                raise ValueError(f"?prepare= takes on or off, not {value!r}")
            options["prepare"] = _SWITCH[value]
        conninfo = urlunsplit(
            parts._replace(scheme="postgresql", query=urlencode(query, quote_via=quote))
        )
        return cls(conninfo, **options)

    @contextmanager
    def _taken(self) -> Iterator[psycopg.Connection[Row]]:
        """A pooled connection, taken with `getconn` and given back with `putconn`, not
        the pool's `connection()`, whose exit commits (a call for nothing: a transaction
        here ends itself); the pool rolls back whatever a failed ROLLBACK left open."""
        conn = self._pool.getconn()
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    @contextmanager
    def _outermost(self, begin: str) -> Iterator[Transaction]:
        with self._taken() as conn:
            tx = _Tx(conn, self._prepare)  # rows are dicts (dict_row)
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
        with self._taken() as conn:  # autocommit: the statement is its snapshot
            return _Tx(conn, self._prepare).one(sql, params)

    def close(self) -> None:
        self._pool.close()

    def __repr__(self) -> str:
        parts = urlsplit(self._conninfo)  # never the password
        host = parts.hostname or ""
        return f"<PostgresStorage {parts.username or ''}@{host}{parts.path}>"
