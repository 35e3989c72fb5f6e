"""Fixtures: a treasury on the storage chosen for the run, organizations with keys, a live
HTTP server.

The storage of the whole run is SQLite (a file in each test's tmp_path, the default) or
PostgreSQL: ``pytest --storage=postgresql`` or ``TREASURY_TEST_STORAGE=postgresql``. On
PostgreSQL each test gets a fresh schema of the server at ``TREASURY_TEST_POSTGRES``
(default ``postgresql://postgres@127.0.0.1:5432/postgres``), dropped afterwards, and the
tests marked ``sqlite_only`` (about SQLite's files, locks and key file) are skipped.

The devnet's c0 has 18 decimals, or what ``pytest --c0-decimals=6`` (or
``TREASURY_TEST_C0_DECIMALS``) says: every devnet and anvil deployment of the run, in this
process, gives c0 that many (`_deploy.DECIMALS`' c0 entry, the deployments' default)."""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import eth_account  # noqa: F401  (its import raises the recursion limit; do it before hypothesis runs)
import httpx
import pytest

from treasury import OrganizationHandle, Treasury
from treasury.backends.storage.base import Storage

MASTER_KEY = "0" * 64  # hex; tests pass it explicitly so no key file is written
#: `node`, `deployed`, `chain_state`: the fixtures of tests that drive an anvil of their own.
pytest_plugins = ["tests.anvil_chain"]
POSTGRES_SERVER = os.environ.get(
    "TREASURY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
STORAGES = {"sqlite": "sqlite", "postgresql": "postgresql", "postgres": "postgresql"}
_storage = "sqlite"  # the storage of this run, set by pytest_configure

sqlite_only = pytest.mark.sqlite_only  # about SQLite itself: skipped on a PostgreSQL run


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--storage",
        default=os.environ.get("TREASURY_TEST_STORAGE") or "sqlite",
        help="the storage every test's treasury uses: sqlite (default) or postgresql"
        " (env TREASURY_TEST_STORAGE; the server: TREASURY_TEST_POSTGRES)",
    )
    parser.addoption(
        "--c0-decimals",
        default=os.environ.get("TREASURY_TEST_C0_DECIMALS") or "18",
        help="the decimals of the c0 every devnet and anvil deployment of the run gives:"
        " 18 (default) or 6, as M0's extensions (env TREASURY_TEST_C0_DECIMALS)",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _storage
    chosen = str(config.getoption("storage")).lower()
    if chosen not in STORAGES:
        raise pytest.UsageError(f"--storage must be sqlite or postgresql, not {chosen!r}")
    _storage = STORAGES[chosen]
    from treasury.backends.chain import _deploy

    given = str(config.getoption("c0_decimals"))
    try:
        places = _deploy.check_c0_decimals(int(given) if given.isdigit() else given)
    except ValueError as error:
        raise pytest.UsageError(f"--c0-decimals: {error}") from None
    _deploy.DECIMALS["c0"] = places  # the default of every deployment of this run


def pytest_report_header(config: pytest.Config) -> list[str]:
    from treasury.backends.chain._deploy import DECIMALS

    server = urlsplit(POSTGRES_SERVER)  # never the password
    where = f" ({server.username or ''}@{server.hostname}:{server.port}{server.path})"
    return [
        f"storage: {_storage}{where if on_postgres() else ''}",
        f"c0 decimals: {DECIMALS['c0']}",
    ]


def pytest_sessionstart(session: pytest.Session) -> None:
    if on_postgres():  # asked for explicitly: no server is an error, not a skipped run
        import psycopg

        try:
            psycopg.connect(POSTGRES_SERVER, connect_timeout=5).close()
        except psycopg.OperationalError as error:
            raise pytest.UsageError(f"no PostgreSQL at {POSTGRES_SERVER}: {error}") from None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not on_postgres():
        return
    skip = pytest.mark.skip(reason="about SQLite itself (sqlite_only); this run is PostgreSQL")
    for item in items:
        if item.get_closest_marker("sqlite_only"):
            item.add_marker(skip)


def on_postgres() -> bool:
    return _storage == "postgresql"


@contextmanager
def fresh_storage(path: Path) -> Iterator[str]:
    """The URL of an empty store for one test (or one module's fixture): the SQLite file
    `path`, or on a PostgreSQL run a fresh schema, dropped when the block ends."""
    if not on_postgres():
        yield f"sqlite:///{path}"
        return
    import psycopg

    schema = "t_" + secrets.token_hex(6)
    with psycopg.connect(POSTGRES_SERVER, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    joiner = "&" if "?" in POSTGRES_SERVER else "?"
    options = quote(f"-c search_path={schema}")
    try:
        yield f"{POSTGRES_SERVER}{joiner}options={options}&application_name={schema}"
    finally:
        with psycopg.connect(POSTGRES_SERVER, autocommit=True) as conn:
            # connections a test left open (a treasury never closed) would hold the
            # schema's locks and the server's connection slots: end them, then drop
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()",
                (schema,),
            )
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def cli_storage(cwd: Path, url: str) -> None:
    """Point the `treasury` command run in `cwd` at `url` on a PostgreSQL run (a
    treasury.toml); on SQLite leave the command's zero-config default file in `cwd`."""
    if on_postgres():
        (cwd / "treasury.toml").write_text(f"storage = {json.dumps(url)}\n")


def open_storage(url: str) -> Storage:
    """The storage backend of `url`, opened as `Treasury.open` opens it."""
    from treasury._infra import plugins

    return plugins.resolve("storage", url, Storage)


@pytest.fixture(autouse=True)
def _quiet_werkzeug() -> None:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "treasury.db"


@pytest.fixture
def storage_url(db_path: Path) -> Iterator[str]:
    """An empty store of this run's storage: SQLite at `db_path`, or a PostgreSQL schema."""
    with fresh_storage(db_path) as url:
        yield url


@pytest.fixture(scope="module")
def module_storage_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One empty store for a module-scoped fixture, shared by the module's tests."""
    with fresh_storage(tmp_path_factory.mktemp("module") / "treasury.db") as url:
        yield url


@pytest.fixture
def new_storage_url(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """Makes more empty stores for one test: ``new_storage_url("other.db")`` is the SQLite
    file of that name in tmp_path, or another fresh PostgreSQL schema."""
    with ExitStack() as stack:
        yield lambda name: stack.enter_context(fresh_storage(tmp_path / name))


@pytest.fixture
def treasury(storage_url: str) -> Iterator[Treasury]:
    t = Treasury.open(storage_url, master_key=MASTER_KEY, allow_private_webhook_urls=True)
    yield t
    t.close()


@dataclass
class Tenant:
    """An organization with one API key: its handle and its secret."""

    org: OrganizationHandle
    secret: str
    key_id: str


def make_tenant(t: Treasury, name: str = "Acme", user_id: str = "user_1") -> Tenant:
    org = t.admin.create_organization(name)
    key = t.admin.create_api_key(org.id, user_id=user_id)
    return Tenant(t.for_api_key(key.secret), key.secret, key.id)


def sealed(t: Treasury) -> None:
    """Seal the pending audit events into their chains, as a worker's pass does (on
    PostgreSQL an append waits for it; SQLite chains each event at once)."""
    t.run_once(only=["seal_audit_events"])


@pytest.fixture
def tenant(treasury: Treasury) -> Tenant:
    return make_tenant(treasury)


@pytest.fixture
def base_url(treasury: Treasury) -> Iterator[str]:
    from treasury.http import create_app
    from treasury.testing.server import serve

    with serve(create_app(treasury)) as url:
        yield url


@pytest.fixture
def client(base_url: str, tenant: Tenant) -> Iterator[httpx.Client]:
    """An httpx client on the live server, authenticated as `tenant`."""
    with httpx.Client(base_url=base_url, headers={"x-api-key": tenant.secret}) as c:
        yield c


def require_anvil() -> str:
    """The anvil binary; skip without it, except under CI (which installs it)."""
    from treasury.anvil import find_anvil

    binary = find_anvil()
    if binary is None:
        reason = "anvil not found (run `npm ci` or set TREASURY_ANVIL)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set")
        pytest.skip(reason)
    return binary


def require_redis() -> str:
    """The URL of the Redis server on 127.0.0.1:6379; skip without it, except under CI
    (which starts it)."""
    redis = pytest.importorskip("redis")
    try:
        redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=1).ping()
    except redis.exceptions.ConnectionError:
        if os.environ.get("CI"):
            pytest.fail("no Redis server on 127.0.0.1:6379; CI is set")
        pytest.skip("no Redis server on 127.0.0.1:6379")
    return "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="module")
def anvil_config() -> Iterator[dict[str, Any]]:
    """A real anvil node with our contracts: the chain configuration `{url, addresses}`."""
    from treasury.anvil import deploy_contracts, start_anvil

    require_anvil()
    with start_anvil() as node:
        yield deploy_contracts(node.url)
