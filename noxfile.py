"""Developer sessions: `nox -s tests` (the test command CI runs), lint, typecheck, core, contracts."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck", "core"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite, with the npm tools (solc, anvil) it drives."""
    session.install("-e", ".[dev,postgres]")
    session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    session.run("pytest", *session.posargs)


@nox.session
def core(session: nox.Session) -> None:
    """`import treasury` and the core work without the `http` extra (no Flask installed)."""
    session.install(".", "pytest")
    session.run("python", "-c", "import importlib.util as u; assert u.find_spec('flask') is None")
    session.run("python", "-c", "import treasury; treasury.Treasury.open('sqlite:///:memory:')")
    session.run("pytest", "tests/test_packaging.py", "-p", "no:cacheprovider")


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[dev]", "mypy")
    session.run("mypy")


@nox.session
def contracts(session: nox.Session) -> None:
    """Rebuild treasury/contracts/artifacts.json from the Solidity sources."""
    session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    session.run("node", "scripts/compile_contracts.mjs", external=True)
