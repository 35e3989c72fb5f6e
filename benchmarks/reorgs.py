"""Reorg detection: the cost of one pass of the reorg check on anvil, with 10,000 watched
wallets and 1,000 open legs, on a short chain and store and on a long one.

    .venv/bin/python benchmarks/reorgs.py [--wallets N] [--legs L] [--history H]
        [--old-marks M] [--repeat R]

The script starts anvil (``npm ci`` ships it; or ``TREASURY_ANVIL``), deploys our
contracts, stores N tracked wallets (default 10,000) of one organization and L marks
(default 1,000: the receipts of open legs the service settled on, awaiting their
confirmations) spread over the newest 128 blocks with their real hashes, then times the
reorg check (`treasury.reorgs.check.check_chain`, the `check_blocks` job's work for one
chain) R times (default 20). Then it makes the history long — H (default 5,000) more
blocks (``anvil_mine``; anvil slows down as its chain grows) and M (default 100,000)
marks of old blocks below the check's reach, as years of settled legs leave — puts the L marks on the new newest 128 blocks, and times it again.
Figures:

* JSON-RPC requests per pass, counted by an event hook on the `RpcChain`'s client (goal:
  2 — ``eth_blockNumber`` and one batch of ``eth_getBlockByNumber`` — whatever the
  wallets, legs, chain length or store length);
* the pass's median time, short and long (goal: the same, ratio about 1);
* against the floor: the same two requests (the head, then one batch for the same
  block numbers) over a plain ``httpx.Client``, answers parsed and not looked at.

At the end a reorg of 5 blocks (``anvil_rollback``, then 5 other blocks) must flag exactly the marks in those
blocks; otherwise the script fails. It exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _common import Rpc, machine, median, random_address, table, track_wallets

from treasury import Treasury
from treasury._records import marks
from treasury.anvil import deploy_contracts, start_anvil
from treasury.backends.chain.base import ChainConfig
from treasury.backends.chain.rpc import RpcChain
from treasury.reorgs import check

CHAIN_ID = 31337


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wallets", type=int, default=10_000)
    parser.add_argument("--legs", type=int, default=1_000)
    parser.add_argument("--history", type=int, default=5_000)
    parser.add_argument("--old-marks", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(machine())
    with start_anvil() as node, tempfile.TemporaryDirectory() as folder:
        config = deploy_contracts(node.url)
        requests = {"n": 0}
        client = httpx.Client(
            timeout=60.0,
            event_hooks={"request": [lambda _: requests.__setitem__("n", requests["n"] + 1)]},
        )
        chain = RpcChain(ChainConfig.parse(CHAIN_ID, config), client=client)
        t = Treasury.open(
            f"sqlite:///{Path(folder) / 'bench.db'}",
            chains={CHAIN_ID: chain},
            master_key="ab" * 32,
            fiat="sandbox://",
        )
        org = t.admin.create_organization("Bench")
        runtime, rpc = t._runtime, Rpc(node.url)
        track_wallets(t, org.id, [random_address() for _ in range(args.wallets)])
        rpc("anvil_mine", hex(marks.REACH))

        def place() -> list[int]:
            """The L marks on the newest blocks, with their canonical hashes."""
            head = int(rpc("eth_blockNumber"), 16)
            numbers = [head - (i % marks.REACH) for i in range(args.legs)]
            hashes = {n: rpc("eth_getBlockByNumber", hex(n), False)["hash"] for n in set(numbers)}
            with t.storage.transaction() as tx:
                tx.execute("DELETE FROM chain_marks WHERE kind = 'leg'")
                for i, number in enumerate(numbers):
                    marks.put(tx, CHAIN_ID, "leg", f"transfer-{i}", number, hashes[number])
            return sorted(set(numbers))

        def timed() -> tuple[list[float], set[int]]:
            times, counts = [], set()
            for _ in range(args.repeat):
                requests["n"] = 0
                began = time.perf_counter()
                found = check.check_chain(runtime, CHAIN_ID)
                times.append(time.perf_counter() - began)
                counts.add(requests["n"])
                if found.get("marks_orphaned"):
                    sys.exit(f"a mark was flagged without a reorg: {found}")
            return times, counts

        def floor(numbers: list[int]) -> float:
            began = time.perf_counter()
            plain = rpc.client
            plain.post(node.url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber"})
            batch = [
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "eth_getBlockByNumber",
                    "params": [hex(n), False],
                }
                for i, n in enumerate(numbers)
            ]
            plain.post(node.url, json=batch).json()
            return time.perf_counter() - began

        numbers = place()
        short, short_counts = timed()
        short_floor = median([floor(numbers) for _ in range(args.repeat)])

        began = time.perf_counter()
        for _ in range(args.history // 1_000):  # anvil mines 1,000 at once fast, not more
            rpc("anvil_mine", hex(1_000))
        with t.storage.transaction() as tx:  # years of settled legs, out of reach
            for i in range(args.old_marks):
                marks.put(tx, CHAIN_ID, "leg", f"old-{i}", 1 + i % 100, "0x" + "00" * 32)
        print(f"history made long in {time.perf_counter() - began:.1f} s")
        numbers = place()
        check.check_chain(runtime, CHAIN_ID)  # the first pass forgets what is out of reach
        long, long_counts = timed()
        long_floor = median([floor(numbers) for _ in range(args.repeat)])

        rows = [
            [
                "short",
                ", ".join(map(str, sorted(short_counts))),
                f"{median(short) * 1000:.1f} ms",
                f"{short_floor * 1000:.1f} ms",
                f"{median(short) / short_floor:.2f}",
            ],
            [
                f"long (+{args.history:,} blocks, +{args.old_marks:,} old marks)",
                ", ".join(map(str, sorted(long_counts))),
                f"{median(long) * 1000:.1f} ms",
                f"{long_floor * 1000:.1f} ms",
                f"{median(long) / long_floor:.2f}",
            ],
        ]
        print(
            f"\n{args.wallets:,} watched wallets, {args.legs:,} marks of open legs over the"
            f" newest {marks.REACH} blocks; median of {args.repeat} passes"
        )
        print(table(["history", "requests per pass", "pass", "floor", "pass / floor"], rows))
        print(f"long / short: {median(long) / median(short):.2f}x")

        head = int(rpc("eth_blockNumber"), 16)
        rpc("anvil_rollback", 5)  # the newest 5 blocks replaced by 5 others
        rpc("evm_increaseTime", 13)
        rpc("anvil_mine", hex(5))
        found = check.check_chain(runtime, CHAIN_ID)
        expected = sum(1 for i in range(args.legs) if i % marks.REACH < 5)
        if found.get("marks_orphaned") != expected or int(rpc("eth_blockNumber"), 16) != head:
            sys.exit(f"the reorg of 5 blocks flagged {found}, expected {expected} marks")
        print(f"a reorg of 5 blocks: {expected} marks flagged in one pass, as expected")
        t.close()


if __name__ == "__main__":
    main()
