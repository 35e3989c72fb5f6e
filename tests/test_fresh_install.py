"""The README's install, as a newcomer runs it: a fresh virtualenv with the `http` extra
alone (no pytest, no hypothesis, no other dev tool), then `treasury --version`, `init`
(twice: the README's one-liner can be run again), `serve` (answers, stops on SIGTERM)
and `demo` in an empty folder.

It installs from this checkout with pip (the package index for the dependencies, pip's
cache when warm); CI also runs the same steps as `nox -s fresh-install`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import sqlite_only
from .processes import free_port

CHECKOUT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "-e",
            f"{CHECKOUT}[http]",
        ],
        check=True,
        timeout=900,
        env=_clean_env(),
    )
    return venv


def _clean_env() -> dict[str, str]:
    """The environment without this run's settings, paths or virtualenv."""
    drop = ("TREASURY_", "PYTHONPATH", "VIRTUAL_ENV", "PYTEST_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def _treasury(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "treasury"), *args],
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@sqlite_only  # the commands' stores are SQLite files in the folder, whatever the suite's
def test_the_cli_works_with_the_http_extra_alone(fresh_venv: Path, tmp_path: Path) -> None:
    python = str(fresh_venv / "bin" / "python")
    for tool in ("pytest", "hypothesis", "nox", "mypy"):
        probe = f"import importlib.util as u; assert u.find_spec({tool!r}) is None"
        subprocess.run([python, "-c", probe], check=True, env=_clean_env())

    version = _treasury(fresh_venv, tmp_path, "--version")
    assert version.returncode == 0, version.stderr
    assert "0." in version.stdout

    first = _treasury(fresh_venv, tmp_path, "init")
    assert first.returncode == 0, first.stderr
    assert "trk_" in first.stdout
    again = _treasury(fresh_venv, tmp_path, "init")
    assert again.returncode == 0, again.stderr
    assert "already initialized" in again.stdout and "trk_" not in again.stdout

    port = free_port()
    serving = subprocess.Popen(
        [str(fresh_venv / "bin" / "treasury"), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=_clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/v1/yield/artifacts", timeout=5)
                break
            except httpx.TransportError:
                assert serving.poll() is None and time.monotonic() < deadline, "serve died"
                time.sleep(0.2)
        assert answer.status_code == 200
    finally:
        serving.terminate()
        assert serving.wait(timeout=30) == 0

    demo = _treasury(fresh_venv, tmp_path, "demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "every step gave what it should" in demo.stdout

    # PostgreSQL without its extra: the error names the extra that installs it.
    opened = "from treasury import Treasury; Treasury.open('postgresql://127.0.0.1/x', chains={})"
    missing = subprocess.run(
        [python, "-c", opened], capture_output=True, text=True, env=_clean_env(), check=False
    )
    assert "pip install 'treasury-api[postgres]'" in missing.stderr, missing.stderr


def test_the_cli_imports_no_test_tool_on_its_ordinary_paths() -> None:
    """The fast guard of the above: loading every command imports neither
    `treasury.testing` nor a test tool (the fresh venv shows it with them absent)."""
    probe = (
        "import sys, treasury.cli, treasury.cli.demo, treasury.http\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pytest', 'hypothesis', '_pytest')"
        " or m.startswith('treasury.testing')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=120)
