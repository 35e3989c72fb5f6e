"""The PostgreSQL backend against both storage conformance suites, each test in a fresh
schema of the machine's PostgreSQL server (127.0.0.1:5432); and its prepared statements
(`PostgresStorage`'s ``PREPARE``/``EXECUTE``), watched on a store of one connection."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from treasury.backends.storage.base import DuplicateKey, Storage
from treasury.testing.statements import StatementSuite
from treasury.testing.storage import Boom, StorageSuite

psycopg = pytest.importorskip("psycopg")
from psycopg.rows import dict_row  # noqa: E402

from treasury.testing.round_trips import Census  # noqa: E402 (needs psycopg)

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
def schema_conninfo() -> Iterator[str]:
    """A connection string whose connections live in a fresh schema, dropped afterwards."""
    server = require_postgres()
    schema = "t_" + secrets.token_hex(6)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield f"{server}?options={quote(f'-c search_path={schema}')}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def schema_url(schema_conninfo: str) -> str:
    return f"{schema_conninfo}&pool_max=20"


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


# -- prepared statements --------------------------------------------------------------

INSERT = "INSERT INTO t (k, n, b, s) VALUES (?, ?, ?, ?)"


@pytest.fixture
def one(schema_conninfo: str) -> Iterator[tuple[Storage, Census]]:
    """A store of one pooled connection, with a table t, and what that connection sends."""
    from treasury.backends.storage.postgresql import PostgresStorage

    census = Census()
    store = PostgresStorage(schema_conninfo, pool_max=1, connection_class=census.connection_class())
    with store.transaction() as tx:
        tx.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER, b BYTEA, s TEXT)")
    census.clear()
    yield store, census
    store.close()


def prepared(store: Storage) -> dict[str, str]:
    """The connection's prepared statements: the text of each, by name."""
    with store.read() as tx:
        rows = tx.query("SELECT name, statement FROM pg_prepared_statements")
    return {row["name"]: row["statement"] for row in rows}


def sent(census: Census, part: str) -> list[str]:
    """The messages `census` counted that hold `part`; clears it."""
    found = [statement for statement in census.statements if part in statement]
    census.clear()
    return found


def keys(store: Storage) -> list[str]:
    with store.read() as tx:
        return [row["k"] for row in tx.query("SELECT k FROM t ORDER BY k")]


def test_a_statement_is_prepared_once_then_executed(one):
    store, census = one
    with store.transaction() as tx:
        tx.execute(INSERT, ("a", 1, b"\x00\xff", None))
    (prepare,) = sent(census, "PREPARE")
    name = prepare.split()[1]
    assert prepare == f"b'PREPARE {name} AS INSERT INTO t (k, n, b, s) VALUES ($1, $2, $3, $4)'"
    with store.transaction() as tx:
        tx.execute(INSERT, ("b", 2, b"", "100% 'quoted'"))
    assert census.statements[0].startswith(
        f'b"BEGIN ISOLATION LEVEL READ COMMITTED; EXECUTE {name}('
    )
    assert sent(census, "PREPARE") == []
    assert prepared(store) == {name: prepare[2:-1]}
    assert keys(store) == ["a", "b"]


def test_answers_are_those_of_the_statement_bound_by_psycopg(one, schema_conninfo):
    """Values of each type, a literal ``%`` and parameters in the answer: as psycopg's own
    binding answers them on another connection."""
    store, census = one
    rows = [("a'b", 1, b"\x00\\", None), ("c%d", -2, None, "é\\n"), ("e", None, b"", "")]
    query = (
        "SELECT k, n, b, s, n + ? AS m, ? || k AS j FROM t"
        " WHERE k LIKE '%' AND (n IS NULL OR n < ?) ORDER BY k"
    )
    params = (5, "x%", 10)
    with store.transaction() as tx:
        for row in rows:
            tx.send(INSERT, row)
    with store.read() as tx:
        ours = tx.query(query, params)
    assert len(sent(census, "PREPARE")) == 2  # the INSERT and the query
    with psycopg.connect(schema_conninfo) as conn, conn.cursor(row_factory=dict_row) as cursor:
        theirs = cursor.execute(query.replace("%", "%%").replace("?", "%s"), params).fetchall()
    assert ours == theirs
    assert len(ours) == 3


def test_a_first_use_rolled_back_stays_prepared(one):
    """PREPARE is not transactional: neither a transaction rolled back after it nor the
    failure of the message that first executes it leave the connection's list wrong."""
    store, census = one
    with pytest.raises(Boom), store.transaction() as tx:
        tx.query("SELECT 1 AS one")
        tx.execute(INSERT, ("a", 1, None, None))  # prepared inside the transaction
        raise Boom
    again = "INSERT INTO t (k) VALUES (?)"
    with store.transaction() as tx:
        tx.execute(INSERT, ("a", 1, None, None))
    with pytest.raises(DuplicateKey), store.transaction() as tx:
        tx.execute(again, ("a",))  # prepared, then its first execution fails
    assert len(sent(census, "PREPARE")) == 2
    with store.transaction() as tx:
        tx.execute(again, ("b",))
        tx.execute(INSERT, ("c", 3, None, None))
    assert len(sent(census, "EXECUTE")) == 2
    assert len(prepared(store)) == 2
    assert keys(store) == ["a", "b", "c"]


def test_a_statement_that_cannot_prepare_goes_as_text(one):
    """PostgreSQL cannot type ``? IS NULL``: the attempt, in a savepoint of its own, fails
    nothing; the statement is sent as text, and never tried again on that connection."""
    store, census = one
    query = "SELECT k FROM t WHERE ? IS NULL OR k = ?"
    for k in ("a", "b"):
        with store.transaction() as tx:
            tx.execute(INSERT, (k, 1, None, None))  # before the attempt, in the transaction
            assert tx.query(query, ("x", k)) == [{"k": k}]
            assert len(tx.query(query, (None, k))) == ord(k) - ord("a") + 1
    attempts = sent(census, "IS NULL")
    assert len([m for m in attempts if "PREPARE" in m]) == 1
    assert not [m for m in attempts if "EXECUTE" in m]
    assert keys(store) == ["a", "b"]


def test_psycopg_never_deallocates_them(one):
    """psycopg prepares a statement it ran five times (here the reads' COMMIT) and then
    sends DEALLOCATE ALL after a ROLLBACK; it is told not to prepare."""
    store, _ = one
    with store.transaction() as tx:
        tx.execute(INSERT, ("a", 1, None, None))
    for _ in range(6):
        keys(store)
    with pytest.raises(Boom), store.transaction() as tx:
        tx.query("SELECT 1 AS one")
        raise Boom
    with store.transaction() as tx:
        tx.execute(INSERT, ("b", 1, None, None))
    assert keys(store) == ["a", "b"]


def test_whole_rows_are_not_prepared(one):
    """``SELECT *`` would answer "cached plan must not change result type" once a column
    is added: it goes as text."""
    store, census = one
    with store.transaction() as tx:
        tx.execute(INSERT, ("a", 1, None, None))
    census.clear()
    assert store.read_one("SELECT * FROM t WHERE k = ?", ("a",)) == dict(k="a", n=1, b=None, s=None)
    with store.transaction() as tx:
        tx.execute("ALTER TABLE t ADD COLUMN more TEXT")
    row = store.read_one("SELECT * FROM t WHERE k = ?", ("a",))
    assert row == dict(k="a", n=1, b=None, s=None, more=None)
    assert sent(census, "PREPARE") == []


def test_a_column_whose_type_changed_is_prepared_anew(one):
    """A prepared statement whose answer's type changed fails once (as psycopg's own did),
    and is prepared again; the stale one is deallocated."""
    store, _ = one
    query = "SELECT n FROM t WHERE k = ?"
    with store.transaction() as tx:
        tx.execute(INSERT, ("a", 1, None, None))
    assert store.read_one(query, ("a",)) == {"n": 1}
    (before,) = [name for name, text in prepared(store).items() if "SELECT n" in text]
    with store.transaction() as tx:
        tx.execute("ALTER TABLE t ALTER COLUMN n TYPE BIGINT")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="result type"):
        store.read_one(query, ("a",))
    assert store.read_one(query, ("a",)) == {"n": 1}
    (after,) = [name for name, text in prepared(store).items() if "SELECT n" in text]
    assert after != before


def test_at_most_limit_statements_per_connection(one, monkeypatch):
    """The least recently used goes (deallocated) to make room; it comes back when used."""
    from treasury.backends.storage.postgresql import _Prepared

    store, _ = one
    monkeypatch.setattr(_Prepared, "limit", 2)
    queries = [f"SELECT k FROM t WHERE n = ? AND {i} = {i}" for i in range(4)]
    with store.transaction() as tx:
        tx.execute(INSERT, ("a", 1, None, None))
    for query in [*queries, queries[0]]:
        assert store.read_one(query, (1,)) == {"k": "a"}
    assert sorted(text.split(" AND ")[1] for text in prepared(store).values()) == ["0 = 0", "3 = 3"]


def test_numbered_placeholders():
    from treasury.backends.storage.postgresql import _numbered

    assert _numbered("SELECT '100%%', %s FROM t WHERE s LIKE '%%s' AND n = %s") == (
        "SELECT '100%', $1 FROM t WHERE s LIKE '%s' AND n = $2"
    )


def test_prepare_off_sends_every_statement_as_text(schema_conninfo):
    """``?prepare=off`` (a pooler in transaction mode): nothing is prepared, all answers."""
    from treasury.backends.storage.postgresql import PostgresStorage

    store = PostgresStorage.from_url(schema_conninfo + "&prepare=off")
    try:
        with store.transaction() as tx:
            tx.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER, b BYTEA, s TEXT)")
        for key in ("a", "b", "c"):
            with store.transaction() as tx:
                tx.execute(INSERT, (key, 1, b"", None))
        assert keys(store) == ["a", "b", "c"]
        assert prepared(store) == {}
    finally:
        store.close()
    with pytest.raises(ValueError, match="prepare"):
        PostgresStorage.from_url(schema_conninfo + "&prepare=maybe")
