"""The committed contract artifacts must be exactly what the pinned solc produces.

Rebuild with ``npm ci && node scripts/compile_contracts.mjs`` after editing any
``treasury/contracts/*.sol`` file, and commit ``treasury/contracts/artifacts.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
CONTRACTS_DIR = REPO_ROOT / "treasury" / "contracts"
ARTIFACTS = CONTRACTS_DIR / "artifacts.json"
COMPILE_SCRIPT = REPO_ROOT / "scripts" / "compile_contracts.mjs"

EXPECTED_CONTRACTS = {
    "C0Token",
    "EarnerRateSource",
    "Multicall3",
    "SwapFacility",
    "TestStablecoin",
    "TestTetherToken",
    "YieldDistributor",
}


def _skip_or_fail(reason: str) -> None:
    # CI installs the toolchain with `npm ci`, so a missing one there is a bug.
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set; run `npm ci` before the tests)")
    pytest.skip(f"{reason}; run `npm ci` to enable this test")


def test_committed_artifacts_shape() -> None:
    artifacts = json.loads(ARTIFACTS.read_text(encoding="utf-8"))
    assert list(artifacts) == ["compiler", "evmVersion", "contracts"]
    assert artifacts["evmVersion"] == "cancun"
    assert set(artifacts["contracts"]) == EXPECTED_CONTRACTS
    assert list(artifacts["contracts"]) == sorted(artifacts["contracts"])
    for name, contract in artifacts["contracts"].items():
        assert list(contract) == ["abi", "bytecode"], name
        assert contract["bytecode"].startswith("0x") and len(contract["bytecode"]) > 2, name
        int(contract["bytecode"], 16)  # plain hex: no unlinked library placeholders


def test_compiled_artifacts_match_committed(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        _skip_or_fail("node is not on PATH")
    if not (REPO_ROOT / "node_modules" / "solc" / "package.json").is_file():
        _skip_or_fail("node_modules/solc is not installed")

    out = tmp_path / "artifacts.json"
    proc = subprocess.run(
        [node, str(COMPILE_SCRIPT), str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"compile failed:\n{proc.stdout}\n{proc.stderr}"

    pinned = json.loads((REPO_ROOT / "package.json").read_text(encoding="utf-8"))
    compiled = out.read_bytes()
    assert json.loads(compiled)["compiler"].startswith(pinned["devDependencies"]["solc"] + "+"), (
        "installed solc differs from the version pinned in package.json"
    )
    assert compiled == ARTIFACTS.read_bytes(), (
        "treasury/contracts/artifacts.json is stale: run "
        "`node scripts/compile_contracts.mjs` and commit the result"
    )
