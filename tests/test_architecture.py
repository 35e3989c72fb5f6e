"""The shape docs/architecture.md describes, checked on the source.

`lint-imports` enforces the layers (the domains independent of each other, the shared
records below them); these tests add what a contract does not say: no import cycle
between any two packages of treasury, and no domain's SQL naming another domain's table
(what several domains read lives in `treasury._records`).
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import treasury
from treasury._infra.migrations import MIGRATIONS

ROOT = Path(treasury.__file__).resolve().parent
PYPROJECT = ROOT.parent / "pyproject.toml"

#: The tables each domain owns: the only ones its own SQL may name.
OWNED = {
    "admin": {"organizations", "api_keys"},
    "test_helpers": set(),
    "deposits": {"log_cursors", "deposits", "held_logs"},
    "transfers": {
        "transfers",
        "transfer_legs",
        "leg_versions",
        "nonce_holes",
        "fiat_cursor",
        "gas_topups",
    },
    "virtual": {"virtual_accounts", "virtual_wallets"},
    "wallets": {"wallets"},
    "recipients": {"recipients"},
    "bank_accounts": {"bank_accounts"},
    "transactions": {"transactions"},
    "balances": set(),
    "swaps": set(),
    "yields": {"yield_snapshots", "yield_balances", "yield_periods", "yield_leaves"},
    "webhooks": {"webhooks", "webhook_deliveries", "webhook_attempts", "webhook_resends", "events"},
    "policy": {"policies"},
    "audit": {"audit_events", "audit_heads"},
    "reorgs": set(),
    "books": {
        "journal",
        "journal_groups",
        "journal_balances",
        "reconciliation_runs",
        "reconciliation_breaks",
        "reconciliation_pairs",
    },
}
#: Every table the migrations create.
TABLES = {
    name
    for _, _, statements in MIGRATIONS
    for statement in statements
    for name in re.findall(r"CREATE TABLE (\w+)", statement)
}
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+(\w+)")
_HELPER_TABLE = re.compile(
    r"\b(?:insert_numbered|insert_new|lease_rows|take_expired_leases)\(\s*tx,\s*\"(\w+)\""
)


def module_names() -> dict[str, Path]:
    """Every module of treasury by dotted name (a package by its own name)."""
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The treasury modules `name` imports (anywhere in it, lazy imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in modules else base)
    return {target for target in targets if target in modules}


def package_of(name: str, modules: dict[str, Path]) -> str:
    """The unit a module belongs to: its package, except that a module at the top
    (`treasury.errors`, `treasury._treasury`) and a backend implementation (outside the
    layers, found through entry points: `treasury.backends.chain.rpc`) are their own."""
    parts = name.split(".")
    top = len(parts) == 2
    implementation = len(parts) == 4 and parts[1] == "backends" and parts[3] != "base"
    if modules[name].name == "__init__.py" or top or implementation:
        return name
    return name.rpartition(".")[0]


def test_no_import_cycle_between_packages() -> None:
    modules = module_names()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        source = package_of(name, modules)
        graph[source] |= {
            target
            for target in (package_of(t, modules) for t in imported(name, path, modules))
            if target != source
        }
    assert {"treasury.transfers", "treasury._records", "treasury.errors"} <= set(graph)
    assert "treasury._records" in graph["treasury.transfers"]
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise AssertionError(f"import cycle between packages: {error.args[1]}") from None


def domains() -> list[str]:
    """The domain packages, from the layer of the layers contract joined with ``|``."""
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    (independent,) = [layer for layer in layers if "|" in layer]
    below = layers[layers.index(independent) + 1]
    assert below == "treasury._records"  # what several domains read sits right below them
    return [name.strip().removeprefix("treasury.") for name in independent.split("|")]


def test_every_domain_is_independent_and_declares_its_tables() -> None:
    assert sorted(domains()) == sorted(OWNED)
    assert set().union(*OWNED.values()) <= TABLES


def test_no_domain_names_another_domains_table() -> None:
    strays = []
    for domain, owned in OWNED.items():
        for path in sorted((ROOT / domain).rglob("*.py")):
            text = path.read_text()
            named = set(_SQL_TABLE.findall(text)) | set(_HELPER_TABLE.findall(text))
            strays += [f"{path.relative_to(ROOT)}: {t}" for t in sorted((named & TABLES) - owned)]
    assert not strays, f"SQL on another domain's tables (move it to treasury._records): {strays}"
