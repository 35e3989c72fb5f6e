"""docs/quickstart.md, as a newcomer follows it: its Python session runs as written (gas
funded before the deposit, which completes), and its HTTP session funds ETH before the
deposit that needs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "quickstart.md"


def _section(title: str) -> str:
    text = PAGE.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_the_python_session_runs_as_written(tmp_path: Path) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", _section("The same in Python"), re.S)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert "ETH" in lines and lines[-1] == "completed"


def test_the_http_session_funds_gas_before_the_deposit() -> None:
    session = _section("A first session over HTTP")
    eth = session.index('\\"token\\": \\"ETH\\"')
    deposit = session.index("$B/transfers")
    assert eth < deposit
    assert '"symbol": "ETH"' in session  # the balances answer shows the gas coin
