"""The public surface, compared with the modules (as httpx's test_exported_members.py does).

A public package (a package of `treasury` whose dotted name has no part starting with an
underscore) declares `__all__`: every public name it holds, other than a submodule, is in
it, and it lists only names it holds. The public modules at the top (`treasury.config`,
`treasury.errors`, `treasury.money`, `treasury.anvil`) do the same for every public name
they define (their imports are not theirs to export). The documentation sends readers only to the public modules
listed in docs/python-api.md ("The public surface"); anything else (`treasury.transfers.store`
and the rest of a domain's inside) is internal.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import treasury

ROOT = Path(__file__).resolve().parent.parent
PUBLIC_MODULES = ["treasury.anvil", "treasury.config", "treasury.errors", "treasury.money"]


def public_packages() -> list[str]:
    found = ["treasury"]
    for info in pkgutil.walk_packages(treasury.__path__, "treasury."):
        parts = info.name.split(".")
        if info.ispkg and not any(part.startswith("_") for part in parts):
            found.append(info.name)
    return found


def public_names(module: types.ModuleType) -> set[str]:
    """Names a user can reach on `module`, leaving out submodules and `from __future__`."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and type(value).__module__ != "__future__"  # `from __future__ import annotations`
    }


def test_the_public_packages_are_found() -> None:
    found = public_packages()
    assert {"treasury.wallets", "treasury.transfers", "treasury.backends.chain"} <= set(found)
    assert "treasury._infra" not in found and "treasury.transfers.store" not in found


def defined_names(module: types.ModuleType) -> set[str]:
    """The public names a module's own top-level statements define."""
    tree = ast.parse(Path(module.__file__ or "").read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return {name for name in names if not name.startswith("_")}


def check_all(module: types.ModuleType, public: set[str]) -> None:
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module.__name__} has no __all__"
    assert len(exported) == len(set(exported)), f"{module.__name__}.__all__ repeats a name"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{module.__name__}.__all__ lists names it does not hold: {missing}"
    unlisted = sorted(public - set(exported))
    assert not unlisted, f"{module.__name__} holds public names outside __all__: {unlisted}"


@pytest.mark.parametrize("name", public_packages())
def test_a_public_package_exports_every_public_name_it_holds(name: str) -> None:
    module = importlib.import_module(name)
    check_all(module, public_names(module))


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_a_public_module_exports_every_public_name_it_defines(name: str) -> None:
    module = importlib.import_module(name)
    check_all(module, defined_names(module))


def test_the_top_level_holds_its_all_and_public_subpackages_only() -> None:
    """After `import treasury` (alone, in a fresh interpreter), the only other public
    attributes are public subpackages and modules, which Python sets on a package as
    they are imported."""
    shown = subprocess.run(
        [sys.executable, "-c", "import treasury; print(*sorted(vars(treasury)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.split()
    public = set(public_packages()) | set(PUBLIC_MODULES)
    others = {n for n in shown if not n.startswith("_") and n not in treasury.__all__}
    assert {f"treasury.{name}" for name in others} <= public


def documented_surface() -> set[str]:
    text = (ROOT / "docs" / "python-api.md").read_text()
    section = text.split("## The public surface", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(treasury[\w.]*)`", section, re.MULTILINE))


def test_the_public_surface_is_documented() -> None:
    documented = documented_surface()
    assert set(public_packages()) | set(PUBLIC_MODULES) <= documented
    for name in documented:
        importlib.import_module(name)  # each exists


def test_the_docs_and_examples_import_only_from_the_public_surface() -> None:
    documented = documented_surface()
    sources = [*(ROOT / "docs").glob("*.md"), *(ROOT / "examples").glob("*.py"), ROOT / "README.md"]
    internal = set()
    for path in sources:
        text = path.read_text()
        for pattern in (
            r"^\s*from (treasury(?:\.\w+)*) import",
            r"^\s*import (treasury(?:\.\w+)*)$",
        ):
            for module in re.findall(pattern, text, re.MULTILINE):
                if module not in documented:
                    internal.add(f"{path.name}: {module}")
    assert not internal, sorted(internal)
