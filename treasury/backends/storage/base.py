"""The storage interface: a transactional SQL store speaking a portable subset.

The library owns the schema and every statement; a backend supplies connections,
transactions and the few type names that differ between dialects. Statements use ``?``
placeholders, ``INSERT … RETURNING``, ``ON CONFLICT``, row values and partial indexes,
which SQLite and PostgreSQL both understand. A backend whose driver speaks the
``format`` paramstyle (psycopg) sets `Transaction.paramstyle`, and `Transaction.execute`
rewrites each statement once (`format_paramstyle`: ``?`` becomes ``%s``, a literal ``%``
becomes ``%%``); nothing else in the library knows about paramstyles.

Isolation:

* `Storage.transaction` is a read-write transaction. Its writes are atomic; a statement
  sees every row committed before it; rows it reads for update (``UPDATE … WHERE``,
  ``INSERT … ON CONFLICT``) are locked to its end, so guarded updates such as
  ``UPDATE … SET status = 'confirmed' WHERE status = 'pending'`` change a row once
  however many writers race. `Transaction.lock` serialises writers of one name.
* `Storage.read` is a snapshot: every statement of the block sees the same committed
  state (or the open transaction's own, inside one), never a half-committed one.

`treasury.testing.storage.StorageSuite` and `treasury.testing.statements.StatementSuite`
are the conformance suites every backend runs.
"""

from __future__ import annotations

import functools
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

Params = Sequence[Any]
Row = dict[str, Any]

_LITERAL_OR_MARK = re.compile(r"'(?:[^']|'')*'|[?%]")


class DuplicateKey(Exception):
    """A unique constraint was violated; backends translate their driver's error to this,
    naming the table whose constraint it was (`table`) when the driver says."""

    def __init__(self, message: str, table: str | None = None) -> None:
        super().__init__(message)
        self.table = table


@functools.lru_cache(maxsize=1024)
def format_paramstyle(sql: str) -> str:
    """`sql` in the ``format`` paramstyle: each ``?`` placeholder becomes ``%s`` and every
    ``%`` (in string literals too, e.g. ``LIKE 'Wallet %'``) becomes ``%%``."""

    def spell(match: re.Match[str]) -> str:
        found = match.group()
        return "%s" if found == "?" else found.replace("%", "%%")

    return _LITERAL_OR_MARK.sub(spell, sql)


class Transaction(ABC):
    """One open transaction (or savepoint) on one connection."""

    #: How the driver marks parameters: ``qmark`` (``?``, as the library writes them)
    #: or ``format`` (``%s``).
    paramstyle: ClassVar[Literal["qmark", "format"]] = "qmark"
    #: Appended to the sub-select of a queue claim (``UPDATE … WHERE id IN (SELECT …
    #: LIMIT ?{skip_locked})``): ``" FOR UPDATE SKIP LOCKED"`` where writers run at once,
    #: so concurrent claimers take different rows; empty where they run one at a time.
    skip_locked: ClassVar[str] = ""
    #: Whether writers run at once (PostgreSQL), not one at a time (SQLite): where they
    #: do, the audit log appends an event outside its organization's chain, and a job
    #: seals it in later (`treasury._infra.audit`), so writers never wait on the chain.
    concurrent: ClassVar[bool] = False
    #: Set by `Storage.transaction` once the outermost transaction committed: whether
    #: what was written in it, nested blocks included, is in the database.
    committed: bool = False

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run a statement; return the number of rows it changed."""
        return self._execute(self._spelled(sql), params)

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a statement that returns rows; each row is a dict by column name."""
        return self._query(self._spelled(sql), params)

    def send(self, sql: str, params: Params = ()) -> None:
        """Run a write whose answer nobody reads. A backend may hold it and send it with
        the transaction's next statement or its COMMIT (one round trip for both): the
        statements still run in order, and its failure still fails the transaction, at
        the latest when it commits. This one runs it at once."""
        self.execute(sql, params)

    def one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def stream(self, sql: str, params: Params = (), size: int = 100) -> Iterator[list[Row]]:
        """The rows of a query in lists of at most `size`, read from the database as they
        are consumed, so a long answer never sits in memory whole. Used inside `read` or
        `transaction`, consumed before the block ends."""
        return self._stream(self._spelled(sql), params, size)

    def _stream(self, sql: str, params: Params, size: int) -> Iterator[list[Row]]:
        """`stream` with `sql` in the driver's paramstyle. This fallback reads every row
        at once; the built-in backends read `size` rows at a time from a cursor."""
        rows = self._query(sql, params)
        for start in range(0, len(rows), size):
            yield rows[start : start + size]

    def ahead(self, sql: str, params: Params = ()) -> bool:
        """Run `sql` in a transaction of its own, committed just before this one begins,
        if this one has sent nothing yet (True); else nothing (False). For a counter whose
        row must not stay locked until this transaction ends. This default never does:
        where writers run one at a time (SQLite), holding it costs nothing. PostgreSQL's
        sends it in the message of this transaction's first statement; `sql` is
        PostgreSQL's then."""
        return False

    @abstractmethod
    def lock(self, name: str) -> None:
        """Hold a named lock until this transaction ends (serialises writers of `name`).
        A backend may send it with the transaction's next statement: it is held before
        that statement runs."""

    @abstractmethod
    def _execute(self, sql: str, params: Params) -> int:
        """`execute` with `sql` already in the driver's paramstyle."""

    @abstractmethod
    def _query(self, sql: str, params: Params) -> list[Row]:
        """`query` with `sql` already in the driver's paramstyle."""

    def _spelled(self, sql: str) -> str:
        return sql if self.paramstyle == "qmark" else format_paramstyle(sql)


class Storage(ABC):
    """A storage backend. Thread-safe: one instance serves every thread of a process."""

    #: Dialect spellings used by the library's migrations: ``pk``, ``blob``, ``clustered``,
    #: ``sortable_text``, and ``define_sha256_hex``: the statement that defines the SQL
    #: function ``sha256_hex(text)`` (the lowercase hex SHA-256 of the text's UTF-8), or
    #: ``""`` where the backend defines it on each connection (see
    #: `treasury._infra.migrations`).
    types: ClassVar[Mapping[str, str]]

    @classmethod
    @abstractmethod
    def from_url(cls, url: str) -> Self:
        """Open the store named by `url` (its scheme is the entry-point name)."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Transaction]:
        """A read-write transaction, committed on success and rolled back on error; once
        the outermost one committed, its `Transaction.committed` is True (the audit log
        reads it: an event whose transaction committed is not appended again).

        Re-entrant per thread: inside an open transaction it opens a savepoint, so an
        inner failure rolls back only the inner block.
        """

    @abstractmethod
    def read(self) -> AbstractContextManager[Transaction]:
        """A consistent read-only snapshot; joins the thread's open transaction if any."""

    def read_one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row of one statement, as `read` sees it. One statement is its own
        snapshot, so a backend may run it without opening a transaction (PostgreSQL
        does: one round trip instead of three, on the path of every request)."""
        with self.read() as tx:
            return tx.one(sql, params)

    @property
    def key_file(self) -> Path | None:
        """Where a generated master key may live beside the data, if anywhere."""
        return None

    @property
    def durable(self) -> bool:
        """Whether the data outlives the process (False for an in-memory database)."""
        return True

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release connections."""


class ThreadTransactions(Storage):
    """A `Storage` whose transactions belong to the calling thread: the outermost one
    opens with `begin_write` (`transaction`) or `begin_read` (`read`) in `_outermost`;
    one opened inside it is a savepoint, and a read inside it joins it. Both built-in
    backends derive from it."""

    begin_write: ClassVar[str]
    begin_read: ClassVar[str]
    _local: threading.local  # `tx` and `depth` of the thread's open transaction

    @abstractmethod
    def _outermost(self, begin: str) -> AbstractContextManager[Transaction]:
        """Open the thread's outermost transaction with `begin`, with ``_local.tx`` set
        and ``_local.depth`` 1; commit it on success, roll it back on error."""

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        depth: int = getattr(self._local, "depth", 0)
        if depth == 0:
            with self._outermost(self.begin_write) as tx:
                yield tx
            tx.committed = True
            return
        tx = self._local.tx
        name = f"sp{depth}"
        tx.execute(f"SAVEPOINT {name}")
        self._local.depth = depth + 1
        try:
            yield tx
        except BaseException:
            tx.execute(f"ROLLBACK TO SAVEPOINT {name}")
            tx.execute(f"RELEASE SAVEPOINT {name}")
            raise
        else:
            tx.execute(f"RELEASE SAVEPOINT {name}")
        finally:
            self._local.depth = depth

    @contextmanager
    def read(self) -> Iterator[Transaction]:
        if getattr(self._local, "depth", 0):
            yield self._local.tx
            return
        with self._outermost(self.begin_read) as tx:
            yield tx

    def read_one(self, sql: str, params: Params = ()) -> Row | None:
        if getattr(self._local, "depth", 0):
            return self._local.tx.one(sql, params)  # type: ignore[no-any-return]
        return self._one_alone(sql, params)

    def _one_alone(self, sql: str, params: Params) -> Row | None:
        """`read_one` outside any transaction of the thread: in a read transaction here;
        a backend whose driver runs one statement in autocommit does that instead."""
        with self._outermost(self.begin_read) as tx:
            return tx.one(sql, params)


def one_row(source: Transaction | Storage, sql: str, params: Params = ()) -> Row | None:
    """The first row of `sql`: read in the open transaction `source`, or, given the
    storage, as one statement of its own (`Storage.read_one`: its own snapshot, one round
    trip on PostgreSQL where a `read` block takes two)."""
    if isinstance(source, Transaction):
        return source.one(sql, params)
    return source.read_one(sql, params)
