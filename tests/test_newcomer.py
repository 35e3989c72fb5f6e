"""What a newcomer met following README.md and docs/ (issue 35), as real processes: the
yield commands while `treasury serve` runs, and `serve` on a store that outlives its
in-process devnet (PostgreSQL with the default devnet)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import MASTER_KEY, cli_storage, on_postgres
from .processes import clean_env, serving

ENV = {"TREASURY_MASTER_KEY": MASTER_KEY}


def treasury(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treasury.cli", *args],
        cwd=cwd, env=clean_env(ENV), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def folder(tmp_path: Path, storage_url: str) -> Path:
    cli_storage(tmp_path, storage_url)
    assert treasury(tmp_path, "init", "--json").returncode == 0
    return tmp_path


def test_the_yield_commands_while_serve_runs(folder: Path) -> None:
    """`yield periods` (--json and the table) and `yield show` answer from the store;
    `yield publish` says exactly why it cannot run here (the devnet is serve's): no
    traceback, and no advice to start `treasury devnet` as if nothing were running."""
    with serving(folder, env=ENV):
        listed = treasury(folder, "yield", "periods", "--json")
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == {"data": [], "count": 0}
        table = treasury(folder, "yield", "periods")
        assert table.returncode == 0 and "(none)" in table.stdout, table.stderr
        missing = treasury(folder, "yield", "show", "1", "--json")
        assert missing.returncode == 1 and "Traceback" not in missing.stderr
        assert "not published" in json.loads(missing.stderr)["error"]
        for args in (("yield", "publish"), ("yield", "publish", "--json")):
            said = treasury(folder, *args)
            assert "Traceback" not in said.stderr, said.stderr
            assert "treasury serve" in said.stderr and "every pass" in said.stderr
            assert "open in another process" not in said.stderr
            # SQLite: serve holds the devnet's file, so nothing runs here (exit 1); a
            # devnet in memory (PostgreSQL): this process's own chain, with a warning
            assert said.returncode == (0 if on_postgres() else 1), said.stdout


def test_serve_says_when_the_devnet_will_not_outlive_it(folder: Path) -> None:
    """On PostgreSQL the default devnet lives in memory: `serve` warns at start that a
    restart resets it and says how to keep it; on SQLite it is kept beside the store
    (`treasury.db.chain`) and nothing is said."""
    with serving(folder, env=ENV) as server:
        pass
    said = server.output()
    if on_postgres():
        assert "chain 31337 is an in-process devnet kept in memory" in said, said
        assert "devnet:///treasury.chain" in said
    else:
        assert "kept in memory" not in said
        assert (folder / "treasury.db.chain").exists()
    # kept in a file, as the warning says: no warning, and the chain outlives the process
    settings = folder / "treasury.toml"
    previous = settings.read_text() if settings.exists() else ""
    settings.write_text(previous + '\n[chains]\n31337 = "devnet:///kept.chain"\n')
    with serving(folder, env=ENV) as server:
        pass
    assert "kept in memory" not in server.output()
    assert (folder / "kept.chain").exists()
