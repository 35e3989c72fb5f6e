"""What a PostgreSQL connection sends: statements and round trips, counted by the
connection's own cursors (a query message, or a pipeline, however many statements it
carries, is one round trip; each answer it gives is a statement). For tests and benchmarks that pin or print a request's cost::

    census = Census()
    storage = PostgresStorage(url, connection_class=census.connection_class())

Needs psycopg (the ``postgres`` extra).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg


@dataclass
class Census:
    """The statements sent, in order, and the round trips they took, since `clear`."""

    statements: list[str] = field(default_factory=list)
    round_trips: int = 0

    def clear(self) -> None:
        self.statements.clear()
        self.round_trips = 0

    def connection_class(self) -> type[psycopg.Connection[Any]]:
        """A `psycopg.Connection` class whose connections count into this census."""
        census = self

        class CountingCursor(psycopg.Cursor[Any]):
            def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
                census.statements.append(str(query))
                if not getattr(self.connection, "piped", False):
                    census.round_trips += 1
                return super().execute(query, params, **kwargs)

            def nextset(self) -> bool | None:
                found = super().nextset()
                if found:  # another statement of the same message
                    census.statements.append(f"(statement {len(census.statements) + 1})")
                return found

        class CountingConnection(psycopg.Connection[Any]):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.cursor_factory = CountingCursor
                self.piped = False

            @contextmanager
            def pipeline(self) -> Iterator[Any]:
                with super().pipeline() as pipe:
                    self.piped = True
                    try:
                        yield pipe
                    finally:
                        self.piped = False
                census.round_trips += 1

        return CountingConnection
