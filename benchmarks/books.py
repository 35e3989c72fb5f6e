"""The books: a reconciliation run over 10,000 (wallet, token) pairs on anvil, and a
balance and a statement read from a journal of 1,000,000 rows vs 1,000.

    .venv/bin/python benchmarks/books.py [--wallets N] [--funded F] [--rows R] [--repeat K]
        [--only run|depth] [--profile]

The script starts anvil (``npm ci`` ships it; or ``TREASURY_ANVIL``), deploys our
contracts and stops the node at the end.

1. **A run.** One organization holds N managed wallets (default 3,334: 10,002 pairs with
   USDC, USDT and c0), F of them (default 200) funded with USDC after the deposit
   detector started, so the books hold their deposits. `treasury.books.reconcile.run`
   (what ``POST /v1/reconciliation/runs`` and the job run) reads every balance at one
   height and compares it with the journal. Figures: HTTP requests to the node and
   JSON-RPC calls per run (counted by an event hook on the `RpcChain`'s client; goal:
   at most 100 requests, one height, ⌈pairs ÷ 100⌉ ``eth_call``s), and its time against
   the floor: the same ``aggregate3`` balance calls at the same block sent by a plain
   ``httpx.Client`` in the same JSON-RPC batches, answers decoded and not compared. Every
   run must tie out.
2. **Balances and statements at depth.** Two stores, one with R journal rows (default
   1,000,000) and one with R / 1,000, written straight into their SQLite files with
   their running sums (posting a million groups through the API is not what this
   measures). One wallet holds a quarter of each journal's rows; a statement of its last
   100 entries and its ledger balances (now, and at a time in the middle of its history)
   are read in-process, K times each (median). Goal: the big journal's time at most
   1.2x the small one's.

Exits 0 whatever the figures (a measurement, not a test).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from _common import machine, median, print_profile, random_address, table

from treasury import Treasury
from treasury.anvil import deploy_contracts, fund, start_anvil
from treasury.backends.chain.base import ChainConfig
from treasury.backends.chain.rpc import CALLS_PER_REQUEST, RpcChain
from treasury.books import reconcile
from treasury.evm.abi import BALANCE_OF
from treasury.evm.multicall import PER_AGGREGATE, multicall_payload, multicall_results

CHAIN_ID = 31337
MASTER_KEY = "ab" * 32


class Counter:
    """HTTP requests to the node and the JSON-RPC calls they carried, by method."""

    def __init__(self) -> None:
        self.requests = 0
        self.methods: dict[str, int] = {}

    def hook(self, request: httpx.Request) -> None:
        self.requests += 1
        body = json.loads(request.content)
        for call in body if isinstance(body, list) else [body]:
            self.methods[call["method"]] = self.methods.get(call["method"], 0) + 1

    def reset(self) -> None:
        self.requests, self.methods = 0, {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wallets", type=int, default=3_334)
    parser.add_argument("--funded", type=int, default=200)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", choices=["run", "depth"], help="one of the two parts")
    parser.add_argument("--profile", action="store_true", help="profile one run")
    args = parser.parse_args()
    print(machine())
    with start_anvil() as node, tempfile.TemporaryDirectory() as folder:
        config = deploy_contracts(node.url)
        counter = Counter()
        client = httpx.Client(timeout=60.0, event_hooks={"request": [counter.hook]})
        chain = RpcChain(ChainConfig.parse(CHAIN_ID, {**config, "confirmations": 0}), client=client)
        if args.only in (None, "run"):
            run_figures(args, node.url, config, chain, counter, Path(folder))
        if args.only in (None, "depth"):
            depth_figures(args, chain, Path(folder))


def run_figures(
    args: argparse.Namespace,
    url: str,
    config: dict[str, Any],
    chain: RpcChain,
    counter: Counter,
    folder: Path,
) -> None:
    t = Treasury.open(
        f"sqlite:///{folder / 'run.db'}", chains={CHAIN_ID: chain}, master_key=MASTER_KEY
    )
    org = t.admin.create_organization("Bench")
    wallets = [random_address() for _ in range(args.wallets)]
    began = time.perf_counter()
    managed(t, org.id, wallets)
    print(f"{args.wallets:,} managed wallets stored in {time.perf_counter() - began:.1f} s")
    t.run_once(["detect_deposits"])  # the detector starts at the head: the books with it
    funded = wallets[: args.funded]
    began = time.perf_counter()
    for n, address in enumerate(funded):
        fund(url, config, address, "USDC", f"{1 + n % 9}.5")
    summary = t.run_once(["detect_deposits"])
    if summary["deposits_received"] != len(funded):
        sys.exit(f"the detector found {summary['deposits_received']} deposits, not {len(funded)}")
    print(
        f"{len(funded)} wallets funded and their deposits posted in {time.perf_counter() - began:.1f} s"
    )
    runtime = t._runtime
    reconcile.run(runtime, CHAIN_ID)  # token metadata read once per chain (then cached)
    samples = []
    for _ in range(args.repeat):
        counter.reset()
        began = time.perf_counter()
        (outcome,) = reconcile.run(runtime, CHAIN_ID)
        elapsed = time.perf_counter() - began
        if outcome.tied_out != outcome.pairs or outcome.breaks_open:
            sys.exit(f"the run did not tie out: {outcome}")
        samples.append((elapsed, counter.requests, dict(counter.methods), outcome))
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        reconcile.run(runtime, CHAIN_ID)
        profiler.disable()
        print_profile(f"one run, {args.wallets:,} wallets", profiler)
    outcome = samples[-1][3]
    pairs = outcome.pairs
    block = outcome.block_number
    calls = [
        (chain.addresses[s], BALANCE_OF, (a,)) for a in wallets for s in ("USDC", "USDT", "c0")
    ]
    floor_client = httpx.Client(timeout=60.0)

    def word(address: object) -> bytes:
        return bytes(12) + bytes.fromhex(str(address)[2:])

    def floor() -> float:
        """The same aggregate3 calls at the same block, built and sent by a plain client
        (the calldata by hand: selector and address word), answers decoded."""
        at = chain.addresses["multicall"]
        began = time.perf_counter()
        payloads = [
            multicall_payload(
                [
                    (target, BALANCE_OF.selector + word(a[0]))
                    for target, _, a in calls[i : i + PER_AGGREGATE]
                ]
            )
            for i in range(0, len(calls), PER_AGGREGATE)
        ]
        for start in range(0, len(payloads), CALLS_PER_REQUEST):
            batch = [
                {
                    "jsonrpc": "2.0",
                    "id": n,
                    "method": "eth_call",
                    "params": [{"to": at, "data": "0x" + p.hex()}, hex(block)],
                }
                for n, p in enumerate(payloads[start : start + CALLS_PER_REQUEST])
            ]
            for answer in floor_client.post(chain.url, json=batch).json():
                for _, data in multicall_results(bytes.fromhex(answer["result"][2:])):
                    int.from_bytes(data[:32], "big")
        return time.perf_counter() - began

    floors = [floor() for _ in range(args.repeat)]
    mine = median([s[0] for s in samples])
    base = median(floors)
    requests = sorted({s[1] for s in samples})
    methods = samples[-1][2]
    print(
        f"\n1. a reconciliation run: {pairs:,} pairs ({args.wallets:,} wallets x 3 tokens), one organization"
    )
    print(
        table(
            ["figure", "value"],
            [
                ["HTTP requests to the node per run", ", ".join(map(str, requests))],
                [
                    "JSON-RPC calls per run",
                    ", ".join(f"{k} {v}" for k, v in sorted(methods.items())),
                ],
                ["eth_calls: ceil(pairs / 100)", f"{math.ceil(pairs / 100)}"],
                ["heights read", f"1 (block {block})"],
                ["run (median)", f"{mine * 1000:.0f} ms"],
                [
                    "floor: the same eth_calls built and sent by a plain client",
                    f"{base * 1000:.0f} ms",
                ],
                ["run / floor", f"{mine / base:.2f}x"],
            ],
        )
    )
    print(
        f"goal: at most 100 requests, one height: {'yes' if max(requests) <= 100 else 'NO'}"
        f" (the run also compares each pair with the journal and writes the run)"
    )
    t.close()


# -- 2. balances and statements at depth ------------------------------------------------


def depth_figures(args: argparse.Namespace, chain: RpcChain, folder: Path) -> None:
    rows = args.rows
    small = max(rows // 1_000, 1_000)
    opened = {size: prepare_depth(size, chain, folder) for size in (small, rows)}
    times: dict[int, dict[str, list[float]]] = {size: {} for size in opened}
    for name in opened[small][1]:
        for size in opened:
            for _ in range(20):
                opened[size][1][name]()  # warm: the pages it reads in the cache (steady state)
        for _ in range(args.repeat * 20):  # the two stores in turn: the same conditions
            for size in opened:
                began = time.perf_counter()
                opened[size][1][name]()
                times[size].setdefault(name, []).append(time.perf_counter() - began)
    for t, _ in opened.values():
        t.close()
    print(f"\n2. a wallet's balances and statement, journal of {rows:,} rows vs {small:,}")
    lines, worst = [], 0.0
    for name in times[small]:
        a, b = median(times[small][name]), median(times[rows][name])
        worst = max(worst, b / a)
        lines.append([name, f"{a * 1000:.2f} ms", f"{b * 1000:.2f} ms", f"{b / a:.2f}x"])
    print(table(["read (median)", f"{small:,} rows", f"{rows:,} rows", "ratio"], lines))
    print(f"goal: at most 1.2x: {'yes' if worst <= 1.2 else 'NO'} (worst {worst:.2f}x)")


def prepare_depth(
    size: int, chain: RpcChain, folder: Path
) -> tuple[Treasury, dict[str, Callable[[], Any]]]:
    """A store whose journal holds `size` rows, and the reads measured on it."""
    path = folder / f"journal-{size}.db"
    t = Treasury.open(f"sqlite:///{path}", chains={CHAIN_ID: chain}, master_key=MASTER_KEY)
    org = t.admin.create_organization("Depth")
    wallet = random_address()
    managed(t, org.id, [wallet])
    t.close()
    began = time.perf_counter()
    middle = write_journal(path, org.id, wallet, size)
    print(f"{size:,} journal rows written in {time.perf_counter() - began:.1f} s")
    t = Treasury.open(f"sqlite:///{path}", chains={CHAIN_ID: chain}, master_key=MASTER_KEY)
    handle = t.for_organization(org.id)
    entries = statement_window(path, org.id, wallet)
    shown = handle.statements.get(wallet=wallet, token="USDC", **{"from": entries})
    if len(shown.entries) != 100:
        sys.exit(f"the statement holds {len(shown.entries)} entries, not 100")
    total = sum((Decimal(e.amount) for e in shown.entries), Decimal(0))
    if Decimal(shown.opening) + total != Decimal(shown.closing):
        sys.exit("the statement does not add up")
    (usdc,) = [b for b in handle.ledger.balances(wallet).balances if b.token == "USDC"]
    if usdc.posted != shown.closing:
        sys.exit(f"the ledger's balance {usdc.posted} is not the statement's {shown.closing}")
    reads: dict[str, Callable[[], Any]] = {
        "ledger-balances (now)": lambda: handle.ledger.balances(wallet),
        "ledger-balances (at a past time)": lambda: handle.ledger.balances(wallet, at=middle),
        "statement (100 entries)": lambda: handle.statements.get(
            wallet=wallet, token="USDC", **{"from": entries}
        ),
    }
    return t, reads


def write_journal(path: Path, org_id: str, wallet: str, size: int) -> datetime:
    """`size` rows of deposits (external -> wallet) written straight into the file: a
    quarter to `wallet`, the rest to 999 others, in time order, with their running sums
    and the balances table; the time in the middle of `wallet`'s history."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    groups = size // 2  # two rows each: the wallet's and external's
    start = datetime.now(UTC) - timedelta(seconds=groups + 60)  # all of it in the past
    others = [random_address() for _ in range(999)]
    balances: dict[str, int] = {}
    last: dict[str, str] = {}
    batch: list[tuple[Any, ...]] = []
    middle = start
    mine = 0
    for n in range(groups):
        owner = wallet if n % 4 == 0 else others[n % 999]
        account = f"wallet:{owner}"
        at = (start + timedelta(seconds=n)).isoformat(timespec="microseconds")
        amount = 1 + n % 97
        balances[account] = balances.get(account, 0) + amount
        last[account] = at
        group = f"deposit:{n}"
        batch.append(
            (
                org_id,
                group,
                at,
                CHAIN_ID,
                "USDC",
                account,
                str(amount),
                str(balances[account]),
                n,
                "deposit",
            )
        )
        batch.append(
            (org_id, group, at, CHAIN_ID, "USDC", "external", str(-amount), None, n, "deposit")
        )
        if owner == wallet:
            mine += 1
            if mine == groups // 8:
                middle = start + timedelta(seconds=n, microseconds=500)
        if len(batch) >= 100_000:
            flush(conn, batch)
            batch = []
    flush(conn, batch)
    with conn:
        conn.executemany(
            "INSERT INTO journal_balances (org_id, account, chain_id, token, posted, last_at)"
            " VALUES (?, ?, ?, 'USDC', ?, ?)",
            [(org_id, a, CHAIN_ID, str(b), last[a]) for a, b in balances.items()],
        )
    conn.execute("ANALYZE")
    conn.close()
    return middle


def flush(conn: sqlite3.Connection, batch: list[tuple[Any, ...]]) -> None:
    with conn:
        conn.executemany(
            "INSERT INTO journal (org_id, group_id, at, chain_id, token, account, amount,"
            " balance, block_number, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            batch,
        )


def statement_window(path: Path, org_id: str, wallet: str) -> str:
    """The time of the wallet's 100th newest entry: a window of its last 100."""
    conn = sqlite3.connect(path)
    (at,) = conn.execute(
        "SELECT at FROM journal WHERE org_id = ? AND account = ? AND chain_id = ?"
        " AND token = 'USDC' ORDER BY at DESC, id DESC LIMIT 1 OFFSET 99",
        (org_id, f"wallet:{wallet}", CHAIN_ID),
    ).fetchone()
    conn.close()
    return str(at)


def managed(t: Treasury, org_id: str, addresses: list[str]) -> None:
    """Managed wallets of `org_id` stored in one transaction (a custody key row each, as
    `wallets.create` stores it; creating keys is not what this measures)."""
    now = t.now().isoformat()
    with t.storage.transaction() as tx:
        for number, address in enumerate(addresses, start=1):
            ref = f"bench-{org_id}-{number}"
            tx.execute(
                "INSERT INTO custody_keys (ref, address, private_key, created_at) VALUES (?, ?, ?, ?)",
                (ref, address, b"\0", now),
            )
            tx.execute(
                "INSERT INTO wallets (org_id, number, address, label, type, custody_ref,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, 'managed', ?, ?, ?)",
                (org_id, number, address, f"W{number}", ref, now, now),
            )


if __name__ == "__main__":
    main()
