"""Bringing a store's schema up to date: the migrations of `migrations`, applied in
order, each in one transaction, each at most once (recorded in ``schema_migrations``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..backends.storage.base import Storage, Transaction
from .migrations import MIGRATIONS

__all__ = ["MIGRATIONS", "migrate"]


def migrate(
    storage: Storage,
    *,
    now: str,
    steps: Mapping[int, Callable[[Transaction], object]] | None = None,
) -> int:
    """Apply every migration the store lacks; return the schema version reached.
    `steps`: Python to run after a migration's statements, in its transaction (what SQL
    cannot do alone, such as re-hashing the audit chain with a key)."""
    with storage.transaction() as tx:
        # Under the lock: concurrent CREATE TABLE IF NOT EXISTS can fail in PostgreSQL.
        tx.lock("schema_migrations")
        tx.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    version = 0
    for number, description, statements in MIGRATIONS:
        with storage.transaction() as tx:
            tx.lock("schema_migrations")
            if tx.one("SELECT 1 AS done FROM schema_migrations WHERE version = ?", (number,)):
                version = number
                continue
            for statement in statements:
                if sql := statement.format(**storage.types):  # "": nothing on this backend
                    tx.execute(sql)
            if steps and number in steps:
                steps[number](tx)
            tx.execute(
                "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)",
                (number, description, now),
            )
            version = number
    return version
