"""The vendored M0 fixture's committed artifacts are exactly what its pinned solcs build.

Rebuild with ``npm ci && npm run compile:m0`` after changing anything under
``tests/fixtures/m0/`` (its README says where each file comes from).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "m0"
ARTIFACTS = FIXTURE / "artifacts.json"
COMPILE_SCRIPT = REPO_ROOT / "scripts" / "compile_m0_fixture.mjs"
SOLCS = ("solc-0.8.23", "solc-0.8.26")


def test_committed_artifacts_shape() -> None:
    artifacts = json.loads(ARTIFACTS.read_text(encoding="utf-8"))
    assert sorted(artifacts["compilers"]) == list(SOLCS)
    assert set(artifacts["contracts"]) == {
        "JMIExtension",
        "MToken",
        "ProxyAdmin",
        "SwapFacility",
        "TestRegistrar",
        "TransparentUpgradeableProxy",
        "UniswapV3SwapAdapter",
    }
    for name, contract in artifacts["contracts"].items():
        assert (FIXTURE / contract["source"]).is_file(), name
        int(contract["bytecode"], 16)  # plain hex: no unlinked library placeholders


def test_each_vendored_repository_keeps_its_licence() -> None:
    roots = [p.parent for p in FIXTURE.rglob("LICENSE")]
    for source in FIXTURE.rglob("*.sol"):
        assert "SPDX-License-Identifier:" in source.read_text(encoding="utf-8"), source
        if source.parts[len(FIXTURE.parts)] != "doubles":
            assert any(root in source.parents for root in roots), source


def test_compiled_artifacts_match_committed(tmp_path: Path) -> None:
    node = shutil.which("node")
    missing = [s for s in SOLCS if not (REPO_ROOT / "node_modules" / s / "package.json").is_file()]
    if node is None or missing:
        reason = "node is not on PATH" if node is None else f"{', '.join(missing)} not installed"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set; run `npm ci` before the tests)")
        pytest.skip(f"{reason}; run `npm ci` to enable this test")

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
    for alias, version in json.loads(out.read_bytes())["compilers"].items():
        assert pinned["devDependencies"][alias] == f"npm:solc@{version.split('+')[0]}", alias
    assert out.read_bytes() == ARTIFACTS.read_bytes(), (
        "tests/fixtures/m0/artifacts.json is stale: run `npm run compile:m0` and commit it"
    )
