"""Payout runs: hundreds of deposits from one wallet on anvil with a block time.

    .venv/bin/python benchmarks/payouts.py [--runs 200,1000] [--caps 64,4096]
        [--block-time 2] [--interval 0.5] [--singles 200]

For each `max_in_flight` cap (the default, 64, and one the runs never reach) a treasury
on its own SQLite file (WAL, synchronous=FULL) is served by waitress in a thread, with
its jobs in a background thread every `--interval` seconds (as `treasury serve` runs
them, whose default is 5 s), on an anvil node the script starts, mining a block every
`--block-time` seconds. For each run size N, a fresh wallet (funded before the node's
block time is set) sends one `POST /v1/transfers/batch` of N deposits (1 USDC each, to
the wallet itself: an approval and a swap each) over one keep-alive `httpx.Client`.

Three figures, each against a floor from the same run:

* blocks spanned (the first to the last block holding one of the run's legs) vs the
  gas-limit minimum, ceil(gas the legs used / the block gas limit): goal <= minimum + 2;
* time from the request to the last completion (every transfer `completed`, read from the
  store every 50 ms) vs blocks spanned x block time: goal <= 1.5;
* accepted transfers per second through the batch endpoint (N / the request's time) vs
  `--singles` single `POST /v1/transfers`, one after another, from another fresh wallet
  of the same treasury (information: the ratio batch / single).

Checks (a wrong result is an error, not a figure): every item 201 and every transfer
completed, each wallet's USDC down by exactly what it sent, its legs' nonces consecutive
and each mined once. The process exits 0 whatever the figures: a measurement, not a test.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from _common import Rpc, machine, table, waitress_server

from treasury import Settings, Treasury
from treasury.anvil import deploy_contracts, fund, start_anvil
from treasury.http import create_app

CHAIN_ID = 31337
MASTER_KEY = "0" * 64
AMOUNT = "1"  # USDC per deposit
MARGIN = 100  # USDC more than a run needs
TIMEOUT = httpx.Timeout(600.0, connect=5.0)


@dataclass
class Measured:
    cap: int
    n: int
    request_s: float  # the batch request, start to answer
    done_s: float  # start of the request to the last completion
    blocks: int  # spanned: first to last block holding a leg
    minimum: int  # ceil(gas used / block gas limit)
    gas_per_deposit: float
    block_time: float

    @property
    def floor_s(self) -> float:
        return self.blocks * self.block_time

    @property
    def accepted_per_s(self) -> float:
        return self.n / self.request_s


@dataclass
class Single:
    cap: int
    n: int
    seconds: float

    @property
    def accepted_per_s(self) -> float:
        return self.n / self.seconds


class Bench:
    """One treasury (one cap) on the node, served, its jobs running."""

    def __init__(
        self,
        stack: ExitStack,
        workdir: Path,
        node_url: str,
        config: dict[str, Any],
        cap: int,
        interval: float,
    ) -> None:
        self.node_url, self.config, self.cap = node_url, config, cap
        self.t = stack.enter_context(
            Treasury.open(
                f"sqlite:///{workdir}/payouts-{cap}.db",
                master_key=MASTER_KEY,
                chains={CHAIN_ID: config},
                rate_limit="1000000/60 seconds",
                settings=Settings.load({"max_in_flight": cap}, env={}),
            )
        )
        org_id = self.t.admin.create_organization(f"Payouts {cap}").id
        self.key = self.t.admin.create_api_key(org_id, user_id="bench")
        self.org = self.t.for_organization(org_id)
        self.interval = interval
        self.stack = stack

    def wallet(self, n: int) -> str:
        """A fresh managed wallet with what `n` deposits need, and a margin: a balance
        read across a block boundary holds a just-mined leg twice for that moment."""
        made = self.org.wallets.create(label=f"Run {uuid.uuid4().hex[:8]}").address
        fund(self.node_url, self.config, made, "USDC", str(n * int(AMOUNT) + MARGIN))
        fund(self.node_url, self.config, made, "ETH", "100")
        return made

    @contextmanager
    def serving(self) -> Iterator[httpx.Client]:
        with (
            waitress_server(create_app(self.t)) as url,
            httpx.Client(
                base_url=f"{url}/v1", timeout=TIMEOUT, headers={"x-api-key": self.key.secret}
            ) as client,
            self.t.run_in_background(self.interval),
        ):
            yield client


def deposit(wallet: str) -> dict[str, Any]:
    return {
        "amount": AMOUNT,
        "source": {"currency": "usdc", "payment_rail": "ethereum", "from_address": wallet},
        "destination": {"currency": "c0", "payment_rail": "ethereum", "to_address": wallet},
    }


def completed_all(t: Treasury, wallet: str, n: int, started: float, within: float = 900) -> float:
    """Wait until the wallet's `n` transfers are completed; seconds since `started`."""
    while True:
        with t.storage.read() as tx:
            rows = tx.query(
                "SELECT status, COUNT(*) AS k FROM transfers WHERE wallet_address = ?"
                " GROUP BY status",
                (wallet,),
            )
        found = {row["status"]: int(row["k"]) for row in rows}
        if found.get("failed"):
            raise RuntimeError(f"{found['failed']} transfers of {wallet} failed")
        if found.get("completed", 0) == n:
            return time.perf_counter() - started
        if time.perf_counter() - started > within:
            raise RuntimeError(f"not completed within {within} s: {found}")
        time.sleep(0.05)


def check_legs(t: Treasury, rpc: Rpc, wallet: str, n: int) -> tuple[int, int, int]:
    """The run's legs: consecutive nonces, each mined with status 1; (first block, last
    block, gas used). The wallet's USDC down by exactly what it sent (the margin left)."""
    with t.storage.read() as tx:
        legs = tx.query(
            "SELECT nonce, hash FROM transfer_legs WHERE sender = ? ORDER BY nonce", (wallet,)
        )
    nonces = [int(leg["nonce"]) for leg in legs]
    if len(legs) != 2 * n or nonces != list(range(nonces[0], nonces[0] + 2 * n)):
        raise RuntimeError(f"{len(legs)} legs, nonces not consecutive from {nonces[:3]}")
    receipts = []
    for at in range(0, len(legs), 500):
        calls = [("eth_getTransactionReceipt", [leg["hash"]]) for leg in legs[at : at + 500]]
        receipts += rpc.batch(calls)
    if any(r is None or r["status"] != "0x1" for r in receipts):
        raise RuntimeError("a leg has no successful receipt")
    blocks = [int(r["blockNumber"], 16) for r in receipts]
    gas = sum(int(r["gasUsed"], 16) for r in receipts)
    usdc = t.chain(CHAIN_ID).addresses["USDC"]
    data = "0x70a08231" + wallet.removeprefix("0x").rjust(64, "0")
    left = int(rpc("eth_call", {"to": usdc, "data": data}, "latest"), 16)
    if left != MARGIN * 10**6:
        raise RuntimeError(f"the wallet kept {left} raw USDC, not the margin")
    return min(blocks), max(blocks), gas


def run_batch(
    bench: Bench, client: httpx.Client, rpc: Rpc, wallet: str, n: int, block_time: float
) -> Measured:
    items = [deposit(wallet) for _ in range(n)]
    started = time.perf_counter()
    answer = client.post(
        "/transfers/batch", json={"items": items}, headers={"Idempotency-Key": str(uuid.uuid4())}
    )
    request_s = time.perf_counter() - started
    answer.raise_for_status()
    statuses = {item["status"] for item in answer.json()["data"]}
    if statuses != {201}:
        raise RuntimeError(f"items answered {statuses}")
    done_s = completed_all(bench.t, wallet, n, started)
    first, last, gas = check_legs(bench.t, rpc, wallet, n)
    limit = int(rpc("eth_getBlockByNumber", hex(last), False)["gasLimit"], 16)
    return Measured(
        cap=bench.cap,
        n=n,
        request_s=request_s,
        done_s=done_s,
        blocks=last - first + 1,
        minimum=math.ceil(gas / limit),
        gas_per_deposit=gas / n,
        block_time=block_time,
    )


def run_singles(bench: Bench, client: httpx.Client, rpc: Rpc, wallet: str, n: int) -> Single:
    started = time.perf_counter()
    for _ in range(n):
        answer = client.post(
            "/transfers", json=deposit(wallet), headers={"Idempotency-Key": str(uuid.uuid4())}
        )
        if answer.status_code != 201:
            raise RuntimeError(f"a single POST answered {answer.status_code}: {answer.text}")
    seconds = time.perf_counter() - started
    completed_all(bench.t, wallet, n, started)
    check_legs(bench.t, rpc, wallet, n)
    return Single(bench.cap, n, seconds)


def report(args: argparse.Namespace, runs: list[Measured], singles: list[Single]) -> None:
    print(
        f"\nPayout runs on anvil, a block every {args.block_time:g} s, jobs every"
        f" {args.interval:g} s; deposits of {AMOUNT} USDC (approval + swap each)"
    )
    rows = []
    for m in runs:
        rows.append(
            [
                f"{m.n} items, max_in_flight {m.cap}",
                f"{m.blocks}",
                f"{m.minimum}",
                "PASS" if m.blocks <= m.minimum + 2 else "ABOVE GOAL",
                f"{m.done_s:.1f}",
                f"{m.floor_s:.1f}",
                f"{m.done_s / m.floor_s:.2f}",
                "PASS" if m.done_s <= 1.5 * m.floor_s else "ABOVE GOAL",
                f"{m.request_s:.2f}",
                f"{m.accepted_per_s:.0f}",
            ]
        )
    print(
        table(
            [
                "run",
                "blocks",
                "gas minimum",
                "<= min+2",
                "to last completion s",
                "blocks x block time s",
                "ratio",
                "<= 1.5",
                "request s",
                "accepted/s",
            ],
            rows,
        )
    )
    gas = sum(m.gas_per_deposit for m in runs) / len(runs)
    print(f"gas per deposit (approval + swap): {gas:,.0f}")
    for s in singles:  # against the run of the same size, else the smallest
        batch = sorted((m for m in runs if m.cap == s.cap), key=lambda m: (m.n != s.n, m.n))
        if not batch:
            continue
        m = batch[0]
        print(
            f"max_in_flight {s.cap}: {s.n} single POSTs {s.seconds:.1f} s ="
            f" {s.accepted_per_s:.0f} accepted/s; a batch of {m.n}: {m.accepted_per_s:.0f}"
            f" accepted/s; ratio batch/single {m.accepted_per_s / s.accepted_per_s:.1f}"
        )
    caps = sorted({m.cap for m in runs})
    for n in sorted({m.n for m in runs}):
        by_cap = {m.cap: m for m in runs if m.n == n}
        if len(by_cap) > 1:
            low, high = by_cap[caps[0]], by_cap[caps[-1]]
            print(
                f"what the cap costs, {n} items: max_in_flight {low.cap}: {low.blocks} blocks,"
                f" {low.done_s:.1f} s; max_in_flight {high.cap}: {high.blocks} blocks,"
                f" {high.done_s:.1f} s"
            )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="200,1000", help="run sizes (default 200,1000)")
    parser.add_argument("--caps", default="64,4096", help="max_in_flight values (default 64,4096)")
    parser.add_argument("--block-time", type=int, default=2, help="seconds (default 2)")
    parser.add_argument("--interval", type=float, default=0.5, help="jobs' pause, s (default 0.5)")
    parser.add_argument("--singles", type=int, default=200, help="single POSTs (default 200)")
    parser.add_argument("--dir", default=None, help="where the temporary directory goes")
    args = parser.parse_args(argv)
    args.runs = [int(x) for x in args.runs.split(",")]
    args.caps = [int(x) for x in args.caps.split(",")]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    print(machine())
    runs: list[Measured] = []
    singles: list[Single] = []
    with (
        tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp,
        ExitStack() as stack,
    ):
        node = stack.enter_context(start_anvil())
        config = deploy_contracts(node.url)
        rpc = Rpc(node.url)
        stack.callback(rpc.close)
        benches = [
            Bench(stack, Path(tmp), node.url, config, cap, args.interval) for cap in args.caps
        ]
        wallets = {  # funded while the node mines at once
            (bench.cap, n): bench.wallet(n) for bench in benches for n in args.runs
        }
        single_wallets = {bench.cap: bench.wallet(args.singles) for bench in benches}
        rpc("evm_setIntervalMining", args.block_time)
        for bench in benches:
            with bench.serving() as client:
                for n in args.runs:
                    measured = run_batch(
                        bench, client, rpc, wallets[(bench.cap, n)], n, args.block_time
                    )
                    print(
                        f"max_in_flight {bench.cap}, {n} items: request {measured.request_s:.2f} s,"
                        f" last completion {measured.done_s:.1f} s, {measured.blocks} blocks"
                        f" (gas minimum {measured.minimum})",
                        flush=True,
                    )
                    runs.append(measured)
                if args.singles:
                    single = run_singles(
                        bench, client, rpc, single_wallets[bench.cap], args.singles
                    )
                    print(
                        f"max_in_flight {bench.cap}: {args.singles} singles {single.seconds:.1f} s",
                        flush=True,
                    )
                    singles.append(single)
    report(args, runs, singles)
    print(f"(whole run: {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
