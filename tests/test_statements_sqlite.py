"""The library's statements on SQLite: the statement conformance suite on a file and in memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from treasury.backends.storage.sqlite import SQLiteStorage
from treasury.testing.statements import StatementSuite

pytestmark = pytest.mark.sqlite_only  # the SQLite backend itself


class TestStatementsSQLiteFile(StatementSuite):
    @pytest.fixture
    def storage(self, tmp_path: Path) -> Iterator[SQLiteStorage]:
        store = SQLiteStorage.from_url(f"sqlite:///{tmp_path / 't.db'}")
        yield store
        store.close()


class TestStatementsSQLiteMemory(StatementSuite):
    @pytest.fixture
    def storage(self) -> Iterator[SQLiteStorage]:
        store = SQLiteStorage.from_url("sqlite:///:memory:")
        yield store
        store.close()
