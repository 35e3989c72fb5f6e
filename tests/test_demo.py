"""`treasury demo` on a fresh machine's defaults, as a user runs it: a subprocess in an
empty folder, every step reported, exit 0; a step that does not give what it should (a
transfer not completed within the passes allowed) exits 1 naming the step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import sqlite_only


def demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    return subprocess.run(
        [sys.executable, "-m", "treasury.cli", "demo", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


@sqlite_only  # the demo's own store is a temporary SQLite file whatever the suite's
def test_the_demo_runs_every_step_on_the_defaults(tmp_path):
    done = demo(tmp_path)
    assert done.returncode == 0, done.stderr
    for step in (
        "a managed wallet",
        "the faucet",
        "a webhook to a local receiver",
        "a bank account",
        "an on-ramp of 250 USD",
        "completed",
        "a deposit of 100 USDC into c0",
        "the yield estimate",
        "a webhook delivered and its signature verified",
        "an off-ramp of 50 USDC",
        "the transfers feed",
        "every step gave what it should",
    ):
        assert step in done.stdout, step
    assert "c0 a year" in done.stdout and "raw" not in done.stdout  # token units only
    assert list(tmp_path.iterdir()) == []  # nothing left behind in the user's folder


@sqlite_only
def test_a_step_that_does_not_complete_exits_1_naming_it(tmp_path):
    done = demo(tmp_path, "--passes", "1")
    assert done.returncode == 1
    assert "demo failed: step 6 (the on-ramp" in done.stderr and "not after 1" in done.stderr
