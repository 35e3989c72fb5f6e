"""The typed client as mypy, an IDE and a script's first import see it (DESIGN §2):
each group method is declared and returns the core's own model, never `Any`; the
declared methods are those of the table of operations (the generated module is
current); and ``import treasury.client`` loads models and errors, not the core."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from treasury.client import TreasuryClient

ROOT = Path(__file__).resolve().parent.parent

SNIPPET = """
from treasury.client import TreasuryClient

c = TreasuryClient("http://127.0.0.1:8000", api_key="trk_x")
reveal_type(c.wallets.create(label="x"))
reveal_type(c.wallets.list())
reveal_type(c.transfers.get("00000000-0000-0000-0000-000000000000"))
reveal_type(c.transfers.list(limit=5).data)
reveal_type(c.yields.estimate(31337, "0x" + "0" * 40))
reveal_type(c.bank_accounts.update(1, {"account": {}, "address": {}}))
reveal_type(c.test_helpers.faucet(31337, address="0x", token="usdc", amount="1"))
reveal_type(c.transfers.export(from_="2026-01-01T00:00:00Z", to="2026-02-01T00:00:00Z"))
c.wallets.create(labl="typo")
"""


def _mypy(tmp_path: Path, source: str) -> str:
    (tmp_path / "snippet.py").write_text(source)
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(ROOT / ".mypy_cache"), "snippet.py"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
    )  # fmt: skip
    return done.stdout + done.stderr


def test_mypy_reveals_the_core_models_never_any(tmp_path: Path) -> None:
    shown = _mypy(tmp_path, SNIPPET)
    revealed = [line for line in shown.splitlines() if "Revealed type" in line]
    assert len(revealed) == 8, shown
    assert not any("Any" in line for line in revealed), shown
    expected = [
        "treasury.wallets.models.Wallet",
        "treasury._infra.models.ListOf[treasury.wallets.models.Wallet]",
        "treasury.transfers.models.Transfer",
        "list[treasury.transfers.models.Transfer]",
        "treasury.yields.models.YieldEstimate",
        "treasury.bank_accounts.models.BankAccount",
        "treasury.test_helpers.models.Funded",
        "str",
    ]
    for line, model in zip(revealed, expected, strict=True):
        assert f'"{model}"' in line, line
    assert 'Unexpected keyword argument "labl"' in shown  # a typo is caught before running


def test_the_declared_methods_are_the_table_of_operations() -> None:
    from treasury.operations import OPERATIONS

    checked = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_client.py"), "--check"],
        capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    client = TreasuryClient("http://127.0.0.1:1")
    for operation in OPERATIONS:
        group, method = operation.name.split(".")
        bound = getattr(getattr(client, group), method)
        assert operation.summary in (bound.__doc__ or ""), operation.name
    client.close()


def test_importing_the_client_loads_models_and_errors_not_the_core() -> None:
    code = "import sys, json, treasury.client; print(json.dumps(sorted(sys.modules)))"
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout  # fmt: skip
    loaded = [name for name in json.loads(shown) if name.startswith("treasury")]
    forbidden = ("treasury._treasury", "treasury.operations", "treasury.backends.storage")
    assert not [name for name in loaded if name.startswith(forbidden)], loaded
    assert not [name for name in loaded if name.endswith(".operations")], loaded
    assert not [name for name in loaded if name.startswith("treasury.backends")], loaded
    assert "treasury.wallets.models" in loaded and "treasury.errors" in loaded
    assert len(loaded) < 60, loaded  # models and errors: today 43, the core is over 120


def test_from_treasury_import_treasury_still_works() -> None:
    code = "from treasury import Treasury, OrganizationHandle, RunSummary; print(Treasury.open)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0 and "open" in done.stdout, done.stderr
