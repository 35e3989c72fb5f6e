"""Yield period trees: building an OpenZeppelin StandardMerkleTree and every proof for
100,000 leaves in Python (`treasury.evm.merkle`) against the JavaScript reference
(`@openzeppelin/merkle-tree` on node, `scripts/merkle_reference.mjs`) with the same leaves.

    .venv/bin/python benchmarks/merkle.py [--leaves N] [--rounds R]

The leaves are a period's: ``(uint256 index, address account, uint256 amount)`` in
ascending account order. Each round times the Python side once (``StandardMerkleTree.of``
and ``proof(i)`` for every leaf), then starts node once, which builds the same tree and
every proof three times and reports each time (measured inside node: neither node's start
nor reading the leaves' JSON is counted); node's time for the round is the median of its
three (the first includes its JIT warming up). Both roots must be equal. The ratio is
the median over rounds of Python's time / node's (goal <= 1.0: not slower than the
JavaScript reference). Exits 0 whatever the figures: a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

from treasury.evm.merkle import StandardMerkleTree

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "merkle_reference.mjs"
ENCODING = ["uint256", "address", "uint256"]
GOAL = 1.0


def leaves(n: int) -> list[list[object]]:
    accounts = sorted(f"0x{(i * 2654435761 + 97) % 2**160:040x}" for i in range(n))
    return [[i, a, str(10**18 + i * 987_654_321)] for i, a in enumerate(accounts)]


def python_side(values: list[list[object]]) -> tuple[float, str]:
    """Python's time for the tree and every proof, and the root."""
    start = time.perf_counter()
    tree = StandardMerkleTree.of(values, ENCODING)
    for i in range(len(values)):
        tree.proof(i)
    return time.perf_counter() - start, tree.root


def node_side(node: str, values: list[list[object]]) -> float:
    """Node's time for the same work: the median of its three builds in one process."""
    request = {"leafEncoding": ENCODING, "values": values, "repeat": 3}
    done = subprocess.run(
        [node, str(SCRIPT)], input=json.dumps(request), capture_output=True, text=True, check=True
    )
    return float(median(json.loads(done.stdout)["ms"])) / 1e3


def node_root(node: str, values: list[list[object]]) -> str:
    """Node's root of the same leaves (untimed)."""
    done = subprocess.run(
        [node, str(SCRIPT)],
        input=json.dumps({"leafEncoding": ENCODING, "values": values}),
        capture_output=True,
        text=True,
        check=True,
    )
    return str(json.loads(done.stdout)["dump"]["tree"][0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    node = shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "@openzeppelin" / "merkle-tree").is_dir():
        print("needs node and @openzeppelin/merkle-tree (npm ci)", file=sys.stderr)
        return 1
    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    print(f"Python {sys.version.split()[0]}, node {node_version.strip()}; {args.leaves:,} leaves")
    values = leaves(args.leaves)
    python_times, node_times = [], []
    for r in range(args.rounds):
        seconds, root = python_side(values)
        python_times.append(seconds)
        node_times.append(node_side(node, values))
        print(f"  round {r + 1}: python {seconds:.2f} s, node {node_times[-1]:.2f} s", flush=True)
    if node_root(node, values) != root:
        raise RuntimeError("the roots differ")
    ratios = [p / n for p, n in zip(python_times, node_times, strict=True)]
    print(f"python: {median(python_times):.2f} s; node: {median(node_times):.2f} s (median)")
    ratio = median(ratios)
    verdict = "PASS" if ratio <= GOAL else "ABOVE GOAL"
    print(f"ratio time (python / node): {ratio:.2f} (goal <= {GOAL}) {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
