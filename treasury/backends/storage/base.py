"""The storage interface: a transactional SQL store speaking a portable subset.

The library owns the schema and every query; a backend supplies connections,
transactions and the few type names that differ between dialects. SQL uses ``?``
placeholders, ``INSERT ... RETURNING``, ``ON CONFLICT`` and partial indexes, which
SQLite and PostgreSQL both understand. `treasury.testing.storage.StorageSuite` is the
conformance suite every backend runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, Self

Params = Sequence[Any] | Mapping[str, Any]
Row = dict[str, Any]


class DuplicateKey(Exception):
    """A unique constraint was violated; backends translate their driver's error to this."""


class Transaction(ABC):
    """One open transaction (or savepoint) on one connection."""

    @abstractmethod
    def execute(self, sql: str, params: Params = ()) -> int:
        """Run a statement; return the number of rows it changed."""

    @abstractmethod
    def query(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a statement that returns rows; each row is a dict by column name."""

    @abstractmethod
    def lock(self, name: str) -> None:
        """Hold a named lock until this transaction ends (serialises writers of `name`)."""

    def one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None


class Storage(ABC):
    """A storage backend. Thread-safe: one instance serves every thread of a process."""

    #: Dialect spellings used by the library's migrations: ``pk``, ``blob``, ``clustered``,
    #: ``sortable_text`` (see `treasury._schema`).
    types: ClassVar[Mapping[str, str]]

    @classmethod
    @abstractmethod
    def from_url(cls, url: str) -> Self:
        """Open the store named by `url` (its scheme is the entry-point name)."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Transaction]:
        """A read-write transaction, committed on success and rolled back on error.

        Re-entrant per thread: inside an open transaction it opens a savepoint, so an
        inner failure rolls back only the inner block.
        """

    @abstractmethod
    def read(self) -> AbstractContextManager[Transaction]:
        """A consistent read-only snapshot; joins the thread's open transaction if any."""

    @property
    def key_file(self) -> Path | None:
        """Where a generated master key may live beside the data, if anywhere."""
        return None

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release connections."""
