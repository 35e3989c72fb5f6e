"""The PostgreSQL backend against both storage conformance suites, each test in a fresh
schema of the machine's PostgreSQL server (127.0.0.1:5432)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from treasury.backends.storage.base import Storage
from treasury.testing.statements import StatementSuite
from treasury.testing.storage import StorageSuite

psycopg = pytest.importorskip("psycopg")
SERVER = os.environ.get("TREASURY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def require_postgres() -> str:
    try:
        psycopg.connect(SERVER, connect_timeout=2).close()
    except psycopg.OperationalError:
        if os.environ.get("CI"):
            pytest.fail(f"no PostgreSQL at {SERVER}; CI is set")
        pytest.skip(f"no PostgreSQL at {SERVER}")
    return SERVER


@pytest.fixture
def schema_url() -> Iterator[str]:
    """A URL whose connections live in a fresh schema, dropped afterwards."""
    server = require_postgres()
    schema = "t_" + secrets.token_hex(6)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    options = quote(f"-c search_path={schema}")
    yield f"{server}?options={options}&pool_max=20"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def open_store(url: str) -> Storage:
    from treasury.backends.storage.postgresql import PostgresStorage

    return PostgresStorage.from_url(url)


class TestPostgresStorage(StorageSuite):
    @pytest.fixture
    def storage(self, schema_url: str) -> Iterator[Storage]:
        store = open_store(schema_url)
        yield store
        store.close()


class TestPostgresStatements(StatementSuite):
    @pytest.fixture
    def storage(self, schema_url: str) -> Iterator[Storage]:
        store = open_store(schema_url)
        yield store
        store.close()


def test_a_database_server_needs_a_master_key(schema_url, monkeypatch):
    from treasury import Treasury, TreasuryError

    monkeypatch.delenv("TREASURY_MASTER_KEY", raising=False)
    with pytest.raises(TreasuryError, match="TREASURY_MASTER_KEY"):
        Treasury.open(schema_url, chains={})
    t = Treasury.open(schema_url, chains={}, master_key="1" * 64)  # the URL picks the plugin
    org = t.admin.create_organization("Acme")
    assert t.for_organization(org.id).recipients.create(address="0x" + "ab" * 20, label="x").id == 1
    t.close()
