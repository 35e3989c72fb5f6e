"""Developer sessions: `nox -s tests` (the test command CI runs: the suite on SQLite, then on
PostgreSQL, then the transfers suite with a 6-decimal c0), `tests-sqlite`,
`tests-postgres`, `tests-c0-6`, lint, typecheck, core, schemathesis, docs, openapi,
contracts."""

from __future__ import annotations

from pathlib import Path

import nox
from nox.command import CommandFailed

nox.options.sessions = [
    "tests",
    "lint",
    "typecheck",
    "core",
    "fresh-install",
    "schemathesis",
    "docs",
]
nox.options.reuse_existing_virtualenvs = True

STORAGES = ("sqlite", "postgresql")
#: The transfers suite (transfers, swaps, sweeps, yields, balances, events on the devnet
#: and anvil), run again with a c0 of 6 decimals, as M0's extensions have (about a minute).
C0_SIX_SUITE = (
    "tests/test_transfers*.py",
    "tests/test_virtual.py",
    "tests/test_yield*.py",
    "tests/test_api_chain.py",
    "tests/test_events.py",
    "tests/test_balances*.py",
    "tests/test_chain_anvil.py",
)


def _prepare_tests(session: nox.Session) -> None:
    """The library with every extra the tests use, and the npm tools (solc, anvil)."""
    session.install("-e", ".[dev,postgres]")
    session.run("npm", "ci", "--no-audit", "--no-fund", external=True)


def _pytest(session: nox.Session, storage: str) -> None:
    """The whole suite with every treasury on `storage`; PostgreSQL is the server at
    TREASURY_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/postgres)."""
    session.run("pytest", f"--storage={storage}", *session.posargs)


def _pytest_c0_six(session: nox.Session) -> None:
    """`C0_SIX_SUITE` on SQLite, every devnet and anvil deployment with a 6-decimal c0."""
    files = sorted(str(path) for pattern in C0_SIX_SUITE for path in Path().glob(pattern))
    session.run("pytest", "--storage=sqlite", "--c0-decimals=6", *files, *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite on SQLite, then on PostgreSQL, then the transfers suite with a
    6-decimal c0 (all three run even if one fails)."""
    _prepare_tests(session)
    failed = []
    for storage in STORAGES:
        try:
            _pytest(session, storage)
        except CommandFailed:
            failed.append(storage)
    try:
        _pytest_c0_six(session)
    except CommandFailed:
        failed.append("a 6-decimal c0")
    if failed:
        session.error(f"the tests failed on {' and '.join(failed)}")


@nox.session(name="tests-sqlite")
def tests_sqlite(session: nox.Session) -> None:
    """The whole test suite, every treasury on a SQLite file."""
    _prepare_tests(session)
    _pytest(session, "sqlite")


@nox.session(name="tests-postgres")
def tests_postgres(session: nox.Session) -> None:
    """The whole test suite, every treasury in a fresh schema of a PostgreSQL server."""
    _prepare_tests(session)
    _pytest(session, "postgresql")


@nox.session(name="tests-c0-6")
def tests_c0_six(session: nox.Session) -> None:
    """The transfers suite (`C0_SIX_SUITE`) with a 6-decimal c0 on the devnet and anvil."""
    _prepare_tests(session)
    _pytest_c0_six(session)


@nox.session
def core(session: nox.Session) -> None:
    """`import treasury` and the core work without the `http` extra (no Flask installed)."""
    session.install(".", "pytest")
    session.run("python", "-c", "import importlib.util as u; assert u.find_spec('flask') is None")
    session.run("python", "-c", "import treasury; treasury.Treasury.open('sqlite:///:memory:')")
    session.run("pytest", "tests/test_packaging.py", "-p", "no:cacheprovider")


@nox.session(name="fresh-install", reuse_venv=False)
def fresh_install(session: nox.Session) -> None:
    """The README's install in a new virtualenv, the `http` extra alone (no test tools):
    `treasury --version`, `init` twice (the second changes nothing, exit 0) and `demo`, in
    an empty folder."""
    session.install("-e", ".[http]")
    for tool in ("pytest", "hypothesis"):
        session.run("python", "-c", f"import importlib.util as u; assert not u.find_spec({tool!r})")
    session.chdir(session.create_tmp())
    for stale in ("treasury.db", "treasury.db.key"):
        session.run("rm", "-f", stale, external=True)
    session.run("treasury", "--version")
    session.run("treasury", "init")
    session.run("treasury", "init")
    session.run("treasury", "demo")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, and the import-linter contracts of pyproject.toml (the layers of DESIGN §1)."""
    session.install("ruff", "import-linter")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over the library, with every extra installed so each backend is checked."""
    session.install("-e", ".[dev,postgres]", "mypy")
    session.run("mypy")


@nox.session
def schemathesis(session: nox.Session) -> None:
    """schemathesis against a live server (server errors, response-schema conformance)."""
    session.install("-e", ".[http]", "schemathesis>=4")
    session.run("python", "scripts/schemathesis_run.py", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs-material, the API reference from docs/openapi.json),
    built strictly: any warning fails."""
    session.install("-e", ".[docs]")
    session.run(
        "mkdocs",
        "build",
        "--strict",
        "--site-dir",
        f"{session.create_tmp()}/site",
        env={"NO_MKDOCS_2_WARNING": "1"},
    )


@nox.session
def openapi(session: nox.Session) -> None:
    """Rewrite docs/openapi.json from the table of operations (a test keeps it current)."""
    session.install("-e", ".[http]")
    session.run(
        "python", "-c", "from treasury.http._openapi import write; write('docs/openapi.json')"
    )


@nox.session
def client(session: nox.Session) -> None:
    """Rewrite treasury/client/_generated.py (the typed client's declared methods) from
    the table of operations (tests/test_client_typed.py keeps it current)."""
    session.install("-e", ".", "ruff")
    session.run("python", "scripts/generate_client.py")


@nox.session
def contracts(session: nox.Session) -> None:
    """Rebuild treasury/contracts/artifacts.json from the Solidity sources."""
    session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    session.run("node", "scripts/compile_contracts.mjs", external=True)
