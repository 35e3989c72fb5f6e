"""Deposits: the deposit detector over 10,000 watched wallets and 1,000 blocks on anvil.

    .venv/bin/python benchmarks/deposits.py [--wallets N] [--blocks B] [--deposits D] [--repeat R]

The script starts anvil (``npm ci`` ships it; or ``TREASURY_ANVIL``), deploys our
contracts and stops the node at the end. It watches N tracked wallets (default 10,000)
of one organization, then makes B blocks (default 1,000; ``anvil_mine``) among which D
(default 200) mint USDC to watched wallets and D/4 mint to addresses nobody watches.
The detector (`treasury.deposits.detector.scan_chain`, the `detect_deposits` job's work
for one chain) then scans those blocks from its cursor, R times over (the cursor is put
back between repetitions and the deposits table emptied, so each scan finds every
deposit again). Figures:

* JSON-RPC requests per scan, counted by an event hook on the `RpcChain`'s client, for
  10, 1,000 and N watched wallets (goal: the same whatever the number of wallets: one
  ``eth_getLogs`` per block range of 500, one ``eth_blockNumber``);
* blocks scanned per second with N wallets (median scan time), against the floor: the
  same ``eth_getLogs`` requests (Transfer topic of USDC, USDT and c0 over the same
  ranges) sent by a plain ``httpx.Client`` whose answers are parsed and not looked at
  (the node's share and the transport's). The ratio is the detector's time over the
  floor's; the detector also writes each deposit, its event and the cursor durably.

Every scan must find exactly the D deposits to watched wallets (one ``deposit.received``
event each); otherwise the script fails. It exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import cProfile
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _common import Rpc, machine, median, print_profile, random_address, table, track_wallets

from treasury import Treasury
from treasury.anvil import deploy_contracts, fund, start_anvil
from treasury.backends.chain.base import ChainConfig
from treasury.backends.chain.rpc import RpcChain
from treasury.deposits import detector

CHAIN_ID = 31337


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wallets", type=int, default=10_000)
    parser.add_argument("--blocks", type=int, default=1_000)
    parser.add_argument("--deposits", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="profile one scan (N wallets)")
    args = parser.parse_args()
    print(machine())
    with start_anvil() as node, tempfile.TemporaryDirectory() as folder:
        config = deploy_contracts(node.url)
        requests = {"n": 0}
        client = httpx.Client(
            timeout=30.0,
            event_hooks={"request": [lambda _: requests.__setitem__("n", requests["n"] + 1)]},
        )
        chain = RpcChain(ChainConfig.parse(CHAIN_ID, {**config, "confirmations": 0}), client=client)
        t = Treasury.open(
            f"sqlite:///{Path(folder) / 'bench.db'}",
            chains={CHAIN_ID: chain},
            master_key="ab" * 32,
            fiat="sandbox://",
        )
        org = t.admin.create_organization("Bench")
        handle = t.for_api_key(t.admin.create_api_key(org.id, user_id="bench").secret)
        runtime = t._runtime
        watched = [random_address() for _ in range(args.wallets)]
        began = time.perf_counter()
        track_wallets(t, org.id, watched)
        print(f"{args.wallets:,} tracked wallets stored in {time.perf_counter() - began:.1f} s")
        detector.scan_chain(runtime, CHAIN_ID)  # the cursor starts at the head
        with t.storage.read() as tx:
            start = tx.one("SELECT next_block FROM log_cursors WHERE chain_id = ?", (CHAIN_ID,))
        assert start is not None
        first = int(start["next_block"])
        rng = random.Random(7)
        targets = [rng.choice(watched) for _ in range(args.deposits)]
        strangers = [random_address() for _ in range(args.deposits // 4)]
        rpc = Rpc(node.url)
        for n, address in enumerate(targets + strangers):  # one block each (auto-mining)
            fund(node.url, config, address, "USDC", f"{1 + n % 7}.25")
        made = int(rpc("eth_blockNumber"), 16) - first + 1
        if made < args.blocks:
            rpc("anvil_mine", hex(args.blocks - made))
        last = first + args.blocks - 1
        assert int(rpc("eth_blockNumber"), 16) == last
        del handle

        def scan(wallets: list[str]) -> tuple[float, int]:
            with t.storage.transaction() as tx:
                tx.execute("DELETE FROM webhook_deliveries")
                tx.execute("DELETE FROM events")
                tx.execute("DELETE FROM deposits")
                tx.execute("DELETE FROM wallets WHERE org_id = ?", (org.id,))
                tx.execute("UPDATE log_cursors SET next_block = ?", (first,))
            track_wallets(t, org.id, wallets)
            requests["n"] = 0
            began = time.perf_counter()
            counts = detector.scan_chain(runtime, CHAIN_ID)
            elapsed = time.perf_counter() - began
            expected = sum(1 for a in targets if a in set(wallets))
            if counts["deposits_received"] != expected or counts["blocks_scanned"] != args.blocks:
                sys.exit(f"wrong result: {counts}, expected {expected} deposits")
            with t.storage.read() as tx:
                events = tx.one("SELECT COUNT(*) AS n FROM events WHERE type = 'deposit.received'")
            assert events is not None and events["n"] == expected
            return elapsed, requests["n"]

        tokens = [chain.addresses[s] for s in ("USDC", "USDT", "c0")]
        ranges = [
            (low, min(low + detector.RANGE - 1, last))
            for low in range(first, last + 1, detector.RANGE)
        ]

        def floor() -> float:
            began = time.perf_counter()
            for low, high in ranges:
                rpc.client.post(
                    node.url,
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "eth_getLogs",
                        "params": [
                            {
                                "fromBlock": hex(low),
                                "toBlock": hex(high),
                                "address": tokens,
                                "topics": [detector.TRANSFER_TOPIC],
                            }
                        ],
                    },
                ).json()
            return time.perf_counter() - began

        sizes = sorted({10, 1_000, args.wallets})
        detector.scan_chain(runtime, CHAIN_ID)  # token metadata read once per chain (cached)
        rows, per_size = [], {}
        for size in sizes:
            subset = targets[: min(size, len(targets))] + watched[: max(0, size - len(targets))]
            subset = list(dict.fromkeys(subset))[:size]
            per_size[size] = [scan(subset) for _ in range(args.repeat)]
        floors = [floor() for _ in range(args.repeat)]
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            scan(watched)
            profiler.disable()
            print_profile(f"one scan, {args.wallets:,} wallets", profiler)
        for size in sizes:
            times = [s for s, _ in per_size[size]]
            counts = sorted({n for _, n in per_size[size]})
            rows.append(
                [
                    f"{size:,}",
                    ", ".join(map(str, counts)),
                    f"{median(times) * 1000:.0f} ms",
                    f"{args.blocks / median(times):,.0f}",
                ]
            )
        print(
            f"\n{args.blocks:,} blocks, {len(targets)} deposits to watched wallets, "
            f"{len(strangers)} to others; {len(ranges)} block ranges of {detector.RANGE}"
        )
        print(
            table(
                ["watched wallets", "JSON-RPC requests per scan", "scan (median)", "blocks/s"], rows
            )
        )
        same = len({n for size in sizes for _, n in per_size[size]}) == 1
        print(f"requests independent of the number of wallets: {'yes' if same else 'NO'}")
        mine = median([s for s, _ in per_size[args.wallets]])
        base = median(floors)
        print(
            f"floor: the same {len(ranges)} eth_getLogs over a plain client: {base * 1000:.0f} ms"
        )
        print(
            f"detector / floor with {args.wallets:,} wallets: {mine / base:.2f}x (the floor"
            " only reads; the detector also writes each deposit, its event and the cursor)"
        )
        t.close()


if __name__ == "__main__":
    main()
