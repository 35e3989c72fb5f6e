"""The embedded devnet against anvil: a deposit transfer on each, through the library.

    .venv/bin/python benchmarks/devnet.py [--deposits K] [--rounds R]

One figure against a floor measured in the same run. Two treasuries, each on its own
SQLite file (WAL, synchronous=FULL), create the same deposit (a USDC -> c0 transfer: an
``approve`` of the amount and the facility's ``swap``, signed by a custody wallet, written
ahead and broadcast; ``org.transfers.create`` returns at ``submitted``):

* the devnet: ``devnet://``, the zero-config default: the in-process EVM (revm) whose
  blocks are committed to ``<store>.chain`` (synchronous=FULL) as each is mined;
* the floor: an anvil node the script starts (auto-mining, the npm package
  ``@foundry-rs/anvil``) and stops, reached over JSON-RPC (``RpcChain``). anvil keeps its
  state in memory: it commits nothing to disk, the devnet commits every block.

Each side runs ``--deposits`` deposits per turn, in alternating order over ``--rounds``
rounds; a time is the median of the per-round means, the ratio devnet / anvil the median
of the per-round ratios (goal: at most 3). For information, the same ratio with the
devnet in memory (``sqlite:///:memory:`` keeps the devnet in memory too, so that side's
store is in memory as well). Afterwards every transfer must be ``submitted`` with two
successful receipts, and each wallet's USDC must have moved by what was deposited.
The process exits 0 whatever the figures: a measurement, not a test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import machine, median, table

from treasury import OrganizationHandle, Treasury
from treasury.anvil import deploy_contracts, start_anvil
from treasury.backends.chain import ChainConfig
from treasury.backends.chain.rpc import RpcChain
from treasury.evm.abi import BALANCE_OF

CHAIN_ID = 31337
MASTER_KEY = "0" * 64
GOAL = 3.0
DEPOSIT = "1"  # USDC per deposit


@dataclass
class Side:
    name: str
    org: OrganizationHandle
    chain: Any
    wallet: str
    per_op: list[float] = field(default_factory=list)
    transfers: list[str] = field(default_factory=list)

    def deposit(self) -> None:
        body = {
            "amount": DEPOSIT,
            "source": {"currency": "usdc", "payment_rail": "ethereum", "from_address": self.wallet},
            "destination": {
                "currency": "c0",
                "payment_rail": "ethereum",
                "to_address": self.wallet,
            },
        }
        made = self.org.transfers.create(body, idempotency_key=str(uuid.uuid4()))
        if made.status != "submitted":
            raise RuntimeError(f"{self.name}: a deposit ended {made.status}")
        self.transfers.append(made.id)


def open_side(stack: ExitStack, name: str, storage: str, chain: Any, total: int) -> Side:
    t = stack.enter_context(Treasury.open(storage, master_key=MASTER_KEY, chains={CHAIN_ID: chain}))
    org = t.for_organization(t.admin.create_organization(name).id)
    wallet = org.wallets.create(label="Bench").address
    backend = t.chain(CHAIN_ID)
    backend.faucet(wallet, "ETH", "1000")
    backend.faucet(wallet, "USDC", str(total * int(DEPOSIT)))
    return Side(name, org, backend, wallet)


def usdc_of(side: Side) -> int:
    chain = side.chain
    data = chain.call(chain.addresses["USDC"], BALANCE_OF.encode(side.wallet))
    return int(BALANCE_OF.decode(data)[0])


def check(side: Side) -> None:
    """Every transfer submitted, its legs mined and successful, the USDC all spent."""
    for transfer_id in side.transfers:
        if side.org.transfers.get(transfer_id).status not in ("submitted", "completed"):
            raise RuntimeError(f"{side.name}: transfer {transfer_id} is not submitted")
    if usdc_of(side) != 0:
        raise RuntimeError(f"{side.name}: the wallet still holds {usdc_of(side)} raw USDC")


def run(args: argparse.Namespace, workdir: Path) -> None:
    total = args.deposits * (args.rounds + 1)  # with the warm-up turn
    with ExitStack() as stack:
        node = stack.enter_context(start_anvil())
        anvil = RpcChain.from_config(ChainConfig.parse(CHAIN_ID, deploy_contracts(node.url)))
        sides = [
            open_side(stack, "devnet", f"sqlite:///{workdir}/devnet.db", "devnet://", total),
            open_side(stack, "anvil", f"sqlite:///{workdir}/anvil.db", anvil, total),
            open_side(stack, "devnet in memory", "sqlite:///:memory:", "devnet://", total),
        ]
        if not Path(f"{workdir}/devnet.db.chain").exists():
            raise RuntimeError("the devnet did not keep its chain beside the store")
        for side in sides:  # warm up (not counted)
            for _ in range(args.deposits):
                side.deposit()
        print(f"timing {args.rounds} rounds of {args.deposits} deposits per side ...", flush=True)
        for r in range(args.rounds):
            k = r % len(sides)
            for side in sides[k:] + sides[:k]:
                start = time.perf_counter()
                for _ in range(args.deposits):
                    side.deposit()
                side.per_op.append((time.perf_counter() - start) / args.deposits)
        for side in sides:
            check(side)
    report(args, sides)


def report(args: argparse.Namespace, sides: list[Side]) -> None:
    devnet, anvil, memory = sides
    rounds = [f"r{i + 1}" for i in range(args.rounds)]
    rows = [
        [s.name, *(f"{x * 1e3:.1f}" for x in s.per_op), f"{median(s.per_op) * 1e3:.1f}"]
        for s in sides
    ]
    print()
    print(
        f"Deposit transfers (org.transfers.create, approve + swap), {args.deposits} per side"
        " per round, ms per deposit (mean of the round)"
    )
    print(table(["", *rounds, "median"], rows))
    print()

    def ratio(side: Side) -> float:
        return median([d / a for d, a in zip(side.per_op, anvil.per_op, strict=True)])

    figure = ratio(devnet)
    print(
        f"ratio time (devnet, kept in <store>.chain / anvil): {figure:.2f} (goal <= {GOAL:g})"
        f" {'PASS' if figure <= GOAL else 'ABOVE GOAL'}"
    )
    print(
        f"ratio time (devnet in memory, store in memory / anvil): {ratio(memory):.2f} (information)"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deposits", type=int, default=20, help="deposits per side per round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds (default 6)")
    parser.add_argument("--dir", help="where the stores go (default: a temporary folder)")
    args = parser.parse_args(argv)
    if min(args.deposits, args.rounds) < 1:
        parser.error("--deposits and --rounds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp:
        run(args, Path(tmp))
    print(f"(whole run: {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
