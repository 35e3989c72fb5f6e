"""Where the devnet keeps its blocks: a SQLite file, or nowhere (in memory).

The devnet mines one transaction a block; the ledger records each block's signed
transaction, its sender and its timestamp, committed (WAL, ``synchronous=FULL``) before
the send returns. Replaying the ledger in order on a fresh EVM rebuilds every balance,
contract, nonce and receipt exactly, so a restart or a kill -9 loses nothing that was
acknowledged. The file holds one chain; an exclusive lock on it keeps a second process
from growing a different chain in the same file.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Ledger", "LedgerInUse"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chain (chain_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blocks (
    number INTEGER PRIMARY KEY,
    timestamp INTEGER NOT NULL,
    sender TEXT NOT NULL,
    raw BLOB NOT NULL
);
"""


class LedgerInUse(RuntimeError):
    """Another process holds the ledger's file."""


class Ledger:
    """The blocks of one chain, in `path` (a SQLite file) or in memory when `path` is None."""

    def __init__(self, path: str | None, chain_id: int) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        if path is None:
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LedgerInUse(
                f"the devnet in {path} is open in another process; the in-process devnet "
                "serves one process (run `treasury devnet` for a chain several share)"
            ) from None
        self._lock_fd = fd
        conn = self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.executescript(_SCHEMA)
        row = conn.execute("SELECT chain_id FROM chain").fetchone()
        if row is None:
            conn.execute("INSERT INTO chain (chain_id) VALUES (?)", (chain_id,))
        elif row[0] != chain_id:
            self.close()
            raise ValueError(f"{path} holds chain {row[0]}, not chain {chain_id}")

    def blocks(self) -> Iterator[tuple[int, str, bytes]]:
        """``(timestamp, sender, raw)`` of each recorded block, in order."""
        if self._conn is not None:
            yield from self._conn.execute(
                "SELECT timestamp, sender, raw FROM blocks ORDER BY number"
            )

    def append(self, number: int, timestamp: int, sender: str, raw: bytes) -> None:
        """Record block `number`; returns once it is on disk."""
        if self.path is not None:
            if self._conn is None:
                raise RuntimeError(f"the devnet in {self.path} is closed")
            self._conn.execute(
                "INSERT INTO blocks (number, timestamp, sender, raw) VALUES (?, ?, ?, ?)",
                (number, timestamp, sender, raw),
            )

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """The blocks appended inside are kept all together or not at all (a chain's
        deployment: a crash half-way leaves a file that starts afresh)."""
        if self._conn is None:
            yield
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None
