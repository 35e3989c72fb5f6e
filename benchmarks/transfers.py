"""Transfers: the feed's page cost at depth, and creating deposits on a real anvil node.

    .venv/bin/python benchmarks/transfers.py [--rows N] [--deposits K] [--only feed|deposits]

Two figures, each against a floor measured in the same run:

* the feed (``GET /v1/transfers``, ``org.transfers.list``): N transfers (default
  1,000,000) are written straight into the ``transfers`` table of a treasury's SQLite file
  by one ``INSERT … SELECT`` through its storage (``t.storage.transaction()``; recorded
  deposits, two rows per timestamp so the ``id`` tie-break matters). The whole feed is then
  walked page by page through the library (limit 200), which checks that every row comes
  once, newest first, and keeps the cursors it hands out at a few depths. Timed, with
  ``--repeat`` interleaved repetitions: the first page against a page ``--depth`` deep
  (default 90 %), both of ``--limit`` rows (default 50, the API's default), in-process
  and over HTTP (waitress in a thread, one keep-alive ``httpx.Client``). The floor is the
  first page; the ratio is deep / first (goal: about 1, since page cost must not grow
  with depth; counted as met up to ``MAX_DEPTH_RATIO``). For information, the same
  keyset SELECT on a bare ``sqlite3`` connection, and the OFFSET query keyset pagination
  avoids.
* deposits (a USDC -> c0 transfer: an ``approve`` of the amount and the facility's
  ``swap``, signed by a custody wallet): ``org.transfers.create(…, idempotency_key=…)``
  on an anvil node the script starts (auto-mining) and stops. It returns once both signed
  transactions are accepted by the node (status ``submitted``); it does not wait for a
  receipt, so no floor does either. The floor: bare web3.py sending the same two
  transactions from a funded key (pending nonce, base fee and priority fee from the
  node, ``eth_account`` signatures with the same gas limits,
  ``send_raw_transaction`` twice). For information: bare web3.py sending one ERC-20
  ``transfer`` of the same amount of the same token (one transaction, not the same work),
  and the same two transactions over plain JSON-RPC on an ``httpx.Client`` (the least
  the work costs from Python: one batch for nonce and fees, two sends). Every side runs
  ``--deposits`` operations per turn, in rotating order over ``--rounds`` rounds; a time
  is the median of the per-round means, the ratio floor / treasury the median of the
  per-round ratios. Afterwards every transaction must have a successful receipt, every
  transfer must be ``submitted``, and the balances must have moved by what was sent.

The treasury's database is a real file with its settings (WAL, synchronous=FULL). The
process exits 0 whatever the figures: this is a measurement, not a test; a wrong result
is an error.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _common import (
    Rpc,
    durable_connection,
    machine,
    median,
    table,
    verdict,
    waitress_server,
)

from treasury import OrganizationHandle, Treasury
from treasury.anvil import AnvilNode, deploy_contracts, fund, start_anvil
from treasury.backends.chain import ChainConfig
from treasury.backends.chain.rpc import RpcChain
from treasury.http import create_app
from treasury.transfers.models import TransferSide

CHAIN_ID = 31337
MASTER_KEY = "0" * 64
RATE_LIMIT = "10000000/1 second"  # as recipients.py: the limiter runs, its ceiling is out of reach
MAX_DEPTH_RATIO = 1.2
WALK_LIMIT = 200  # the API's largest page: the walk's page size
TIMEOUT = httpx.Timeout(30.0, connect=5.0)  # as RpcChain's own client
APPROVE_GAS, SWAP_GAS, TRANSFER_GAS = 100_000, 250_000, 100_000  # the library's limits
DEPOSIT = "1"  # USDC per deposit
RAW = 10**6  # its raw units


@dataclass
class Timed:
    """Repeated timings of one operation (seconds)."""

    name: str
    operation: Callable[[], Any]
    times: list[float] = field(default_factory=list)

    @property
    def median_us(self) -> float:
        return median(self.times) * 1e6


def interleaved(sides: list[Timed], repeat: int) -> None:
    """Warm each side up, then `repeat` rounds of one call each, the order rotating."""
    for side in sides:
        for _ in range(5):
            side.operation()
    clock = time.perf_counter
    for rep in range(repeat):
        k = rep % len(sides)
        for side in sides[k:] + sides[:k]:
            start = clock()
            side.operation()
            side.times.append(clock() - start)


# --- the feed ---------------------------------------------------------------------------

# N recorded deposits of one organization, generated inside SQLite: ids are valid UUIDs,
# and rows 2k and 2k+1 share a timestamp (one second apart from the next pair), so pages
# break ties on the id as the feed's (created_at, id) order says.
BUILD = """
INSERT INTO transfers (id, org_id, pairing, status, stage, amount, developer_fee,
    client_reference_id, source, destination, chain_id, wallet_address, transaction_hash,
    created_at, updated_at)
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?),
    stamped(n, at) AS (
        SELECT n, strftime('%Y-%m-%dT%H:%M:%f', '2026-01-01', '+' || (n / 2) || ' seconds')
            || '000+00:00' FROM seq)
SELECT printf('00000000-0000-4000-8000-%012d', n), ?, 'deposit', 'submitted', 'recorded',
    '100', '0', NULL, ?, ?, ?, ?, printf('0x%064x', n), at, at
FROM stamped
"""
# What `treasury/transfers/store.py:page` runs (through `_infra/sql.py:keyset_page`).
COLUMNS = (
    "id, org_id, pairing, status, stage, amount, developer_fee, client_reference_id,"
    " source, destination, chain_id, wallet_address, bank_account_id, transaction_hash,"
    " provider_transfer_id, provider_state, deposit_instructions, deposit_address, failure,"
    " lease_until, created_at, updated_at"
)
FEED = f"SELECT {COLUMNS} FROM transfers WHERE org_id = ? AND stage = 'recorded'"
KEYSET = FEED + " AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?"
OFFSET = FEED + " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"


@dataclass
class Walk:
    seconds: float
    pages: int
    page_ms: list[float]  # each page of the walk, in order
    cursors: dict[int, tuple[str, tuple[str, str]]]  # depth -> (cursor, position after)


def build_feed(t: Treasury, org_id: str, rows: int) -> float:
    wallet = "0x" + secrets.token_hex(20)
    source = TransferSide(
        address=wallet, bank_account=None, chain_id=CHAIN_ID, currency="usdc", amount="100"
    ).model_dump_json()
    destination = TransferSide(
        address=wallet, bank_account=None, chain_id=CHAIN_ID, currency="c0", amount="100"
    ).model_dump_json()
    start = time.perf_counter()
    with t.storage.transaction() as tx:
        tx.execute(BUILD, (rows, org_id, source, destination, CHAIN_ID, wallet))
    return time.perf_counter() - start


def walk_feed(org: OrganizationHandle, rows: int, depths: list[int]) -> Walk:
    """Every page of the feed through the library, checked; the cursors at `depths`."""
    clock = time.perf_counter
    wanted = set(depths)
    cursors: dict[int, tuple[str, tuple[str, str]]] = {}
    page_ms: list[float] = []
    seen, cursor, last = 0, None, None
    start = clock()
    while True:
        before = clock()
        page = org.transfers.list(limit=WALK_LIMIT, cursor=cursor)
        page_ms.append((clock() - before) * 1e3)
        for transfer in page.data:
            key = (transfer.created_at, transfer.id)
            if last is not None and not key < last:
                raise RuntimeError(f"the feed is out of order at row {seen}: {key} after {last}")
            last = key
        seen += len(page.data)
        cursor = page.next_cursor
        if cursor is None:
            break
        if seen in wanted:
            at = page.data[-1]
            cursors[seen] = (cursor, (_stored_time(at.created_at), at.id))
    seconds = clock() - start
    if seen != rows:
        raise RuntimeError(f"the walk saw {seen} transfers, {rows} were written")
    return Walk(seconds, len(page_ms), page_ms, cursors)


def _stored_time(moment: Any) -> str:
    return moment.isoformat(timespec="microseconds")


def bench_feed(args: argparse.Namespace, workdir: Path) -> None:
    rows, limit = args.rows, args.limit
    depth = _round_to(int(rows * args.depth), WALK_LIMIT)
    depths = sorted({_round_to(rows * f // 10, WALK_LIMIT) for f in (1, 5)} | {depth})
    depths = [d for d in depths if 0 < d < rows]
    if depth not in depths:
        raise SystemExit(f"--depth leaves no page at {depth} of {rows} rows")
    path = workdir / "feed.db"
    with ExitStack() as stack:
        t = stack.enter_context(
            Treasury.open(
                f"sqlite:///{path}", master_key=MASTER_KEY, chains={}, rate_limit=RATE_LIMIT
            )
        )
        tenant = t.admin.create_organization("Bench feed")
        org = t.for_organization(tenant.id)
        print(f"building a feed of {rows:,} transfers ...", flush=True)
        build_seconds = build_feed(t, tenant.id, rows)
        print(
            f"  built in {build_seconds:.1f} s ({path.stat().st_size / 1e6:,.0f} MB); walking it ...",
            flush=True,
        )
        walk = walk_feed(org, rows, depths)
        print(f"  walked {walk.pages:,} pages of {WALK_LIMIT} in {walk.seconds:.1f} s", flush=True)

        secret = t.admin.create_api_key(tenant.id, user_id="bench").secret
        url = stack.enter_context(waitress_server(create_app(t))) + "/v1/transfers"
        client = stack.enter_context(httpx.Client(headers={"x-api-key": secret}, timeout=30.0))
        bare = durable_connection(str(path), check_same_thread=False)
        stack.callback(bare.close)
        deep_cursor, deep_position = walk.cursors[depth]

        def fetch(cursor: str | None) -> Callable[[], Any]:
            def http() -> None:
                params = {"limit": limit} if cursor is None else {"limit": limit, "cursor": cursor}
                answer = client.get(url, params=params)
                if answer.status_code != 200 or len(answer.json()["data"]) != limit:
                    raise RuntimeError(f"GET /v1/transfers answered {answer.status_code}")

            return http

        def in_process(cursor: str | None) -> Callable[[], Any]:
            def run() -> None:
                page = org.transfers.list(limit=limit, cursor=cursor)
                if len(page.data) != limit:
                    raise RuntimeError("a short page")

            return run

        newest = bare.execute(
            FEED + " ORDER BY created_at DESC, id DESC LIMIT 1", (tenant.id,)
        ).fetchone()
        first_position = (newest[20], newest[0])

        def keyset(position: tuple[str, str], inclusive: bool) -> Callable[[], Any]:
            # The first page has no cursor: the bare SQL seeks from just above the newest row.
            sql = KEYSET.replace("<", "<=") if inclusive else KEYSET

            def run() -> None:
                found = bare.execute(sql, (tenant.id, *position, limit + 1)).fetchall()
                if len(found) != limit + 1:
                    raise RuntimeError("a short page")

            return run

        def offset(skip: int) -> Callable[[], Any]:
            def run() -> None:
                found = bare.execute(OFFSET, (tenant.id, limit + 1, skip)).fetchall()
                if len(found) != limit + 1:
                    raise RuntimeError("a short page")

            return run

        sides = [
            Timed("in-process, first page", in_process(None)),
            Timed(f"in-process, page at {depth:,}", in_process(deep_cursor)),
            Timed("HTTP, first page", fetch(None)),
            Timed(f"HTTP, page at {depth:,}", fetch(deep_cursor)),
            Timed("bare sqlite3 keyset, first page", keyset(first_position, True)),
            Timed(f"bare sqlite3 keyset, page at {depth:,}", keyset(deep_position, False)),
        ]
        offset_sides = [
            Timed("bare sqlite3 OFFSET, first page", offset(0)),
            Timed(f"bare sqlite3 OFFSET, page at {depth:,}", offset(depth)),
        ]
        print(f"timing ({args.repeat} interleaved repetitions) ...", flush=True)
        interleaved(sides, args.repeat)
        interleaved(offset_sides, max(3, args.repeat // 40))  # slow: a few samples do
        plan = " ".join(
            row[3] for row in bare.execute("EXPLAIN QUERY PLAN " + KEYSET, (tenant.id, "", "", 1))
        )
    report_feed(args, rows, depth, build_seconds, walk, sides + offset_sides, plan)


def _round_to(n: int, step: int) -> int:
    return max(step, n // step * step)


def report_feed(
    args: argparse.Namespace,
    rows: int,
    depth: int,
    build_seconds: float,
    walk: Walk,
    sides: list[Timed],
    plan: str,
) -> None:
    print()
    print(
        f"The transfers feed: {rows:,} transfers, pages of {args.limit} (median of"
        f" {args.repeat} interleaved repetitions; OFFSET: {len(sides[-1].times)})"
    )
    print(table(["", "us per page"], [[s.name, f"{s.median_us:,.0f}"] for s in sides]))
    tenth = max(1, walk.pages // 10)
    print()
    print(
        f"The walk: {walk.pages:,} pages of {WALK_LIMIT}, {walk.seconds:.1f} s"
        f" ({walk.seconds / rows * 1e6:.0f} us per transfer); median ms per page:"
        f" first tenth {median(walk.page_ms[:tenth]):.2f}, last tenth"
        f" {median(walk.page_ms[-tenth:]):.2f}"
    )
    print(f"(setup: building {rows:,} rows took {build_seconds:.1f} s)")
    print(f"query plan of a page after a cursor: {plan}")
    print()
    by = {s.name.split(",")[0] + ("/deep" if " at " in s.name else ""): s for s in sides}
    for label, key in (("in-process", "in-process"), ("HTTP", "HTTP")):
        ratio = by[f"{key}/deep"].median_us / by[key].median_us
        print(
            f"ratio {label} (page at {depth:,} / first page): {ratio:.2f}"
            f" (goal about 1, <= {MAX_DEPTH_RATIO}) {verdict(MAX_DEPTH_RATIO, ratio)}"
        )
    for key in ("bare sqlite3 keyset", "bare sqlite3 OFFSET"):
        ratio = by[f"{key}/deep"].median_us / by[key].median_us
        print(f"ratio {key} (page at {depth:,} / first page): {ratio:.2f} (information)")


# --- deposits ---------------------------------------------------------------------------


def calldata(signature: str, *args: Any) -> bytes:
    """Selector and ABI-encoded arguments, with eth-abi (the floors use no treasury code)."""
    from eth_abi.abi import encode
    from eth_abi.grammar import parse
    from eth_utils.crypto import keccak

    types = [t.to_type_str() for t in parse(signature[signature.index("(") :]).components]
    return keccak(text=signature)[:4] + encode(types, list(args))


class TimedTransport(httpx.BaseTransport):
    """Counts the library's JSON-RPC requests and the time spent in them (body read)."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self.requests = 0
        self.seconds = 0.0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = time.perf_counter()
        response = self._inner.handle_request(request)
        content = response.read()
        response.close()
        self.seconds += time.perf_counter() - start
        self.requests += 1
        return httpx.Response(response.status_code, headers=response.headers, content=content)

    def close(self) -> None:
        self._inner.close()


@dataclass
class Turns:
    """One side of the deposits: per-operation means of each turn."""

    name: str
    operation: Callable[[], list[str]]  # one operation -> the hashes it sent
    requests: int  # JSON-RPC HTTP requests per operation (counted, or by construction)
    per_op: list[float] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)


def bench_deposits(args: argparse.Namespace, workdir: Path) -> None:
    from eth_account import Account
    from web3 import HTTPProvider, Web3

    with ExitStack() as stack:
        node: AnvilNode = stack.enter_context(start_anvil())
        config = deploy_contracts(node.url)
        addresses = config["addresses"]
        transport = TimedTransport()
        client = stack.enter_context(httpx.Client(timeout=TIMEOUT, transport=transport))
        chain = RpcChain(ChainConfig.parse(CHAIN_ID, {**config, "confirmations": 0}), client=client)
        t = stack.enter_context(
            Treasury.open(
                f"sqlite:///{workdir}/deposits.db", master_key=MASTER_KEY, chains={CHAIN_ID: chain}
            )
        )
        org = t.for_organization(t.admin.create_organization("Bench deposits").id)
        wallet = org.wallets.create(label="Bench").address
        keys = {name: Account.create() for name in ("web3", "web3 transfer", "rpc")}
        total = args.deposits * (args.rounds + 1)  # the warm-up turn too
        for address in [wallet, *(k.address for k in keys.values())]:
            fund(node.url, config, address, "ETH", "1000")
            fund(node.url, config, address, "USDC", str(total * 2))
        w3 = Web3(HTTPProvider(node.url))
        rpc = Rpc(node.url)
        stack.callback(rpc.close)
        usdc = Web3.to_checksum_address(addresses["USDC"])
        facility = Web3.to_checksum_address(addresses["swap_facility"])
        c0 = Web3.to_checksum_address(addresses["c0"])
        body = {
            "amount": DEPOSIT,
            "source": {"currency": "usdc", "payment_rail": "ethereum", "from_address": wallet},
            "destination": {"currency": "c0", "payment_rail": "ethereum", "to_address": wallet},
        }
        transfer_ids: list[str] = []

        def treasury_deposit() -> list[str]:
            created = org.transfers.create(body, idempotency_key=str(uuid.uuid4()))
            if created.status != "submitted":
                raise RuntimeError(f"a deposit ended {created.status}")
            transfer_ids.append(created.id)
            return []  # its legs are read from the database afterwards

        def legs(sender: Any, nonce: int, fees: dict[str, int]) -> list[bytes]:
            common = {"chainId": CHAIN_ID, "value": 0, **fees}
            approve = {
                **common,
                "nonce": nonce,
                "to": usdc,
                "gas": APPROVE_GAS,
                "data": calldata("approve(address,uint256)", facility, RAW),
            }
            swap = {
                **common,
                "nonce": nonce + 1,
                "to": facility,
                "gas": SWAP_GAS,
                "data": calldata(
                    "swap(address,address,uint256,address)", usdc, c0, RAW, sender.address
                ),
            }
            return [
                bytes(Account.sign_transaction(tx, sender.key).raw_transaction)
                for tx in (approve, swap)
            ]

        def web3_fees() -> dict[str, int]:
            base = int(w3.eth.get_block("latest")["baseFeePerGas"])
            tip = int(w3.eth.max_priority_fee)
            return {"maxFeePerGas": 2 * base + tip, "maxPriorityFeePerGas": tip}

        def web3_deposit() -> list[str]:
            sender = keys["web3"]
            nonce = w3.eth.get_transaction_count(sender.address, "pending")
            raws = legs(sender, nonce, web3_fees())
            return ["0x" + bytes(w3.eth.send_raw_transaction(raw)).hex() for raw in raws]

        def web3_transfer() -> list[str]:
            sender = keys["web3 transfer"]
            nonce = w3.eth.get_transaction_count(sender.address, "pending")
            tx = {
                "chainId": CHAIN_ID,
                "value": 0,
                "nonce": nonce,
                "to": usdc,
                "gas": TRANSFER_GAS,
                "data": calldata("transfer(address,uint256)", facility, RAW),
                **web3_fees(),
            }
            raw = Account.sign_transaction(tx, sender.key).raw_transaction
            return ["0x" + bytes(w3.eth.send_raw_transaction(raw)).hex()]

        def rpc_deposit() -> list[str]:
            sender = keys["rpc"]
            nonce, block, tip = rpc.batch(
                [
                    ("eth_getTransactionCount", [sender.address, "pending"]),
                    ("eth_getBlockByNumber", ["latest", False]),
                    ("eth_maxPriorityFeePerGas", []),
                ]
            )
            fees = {
                "maxFeePerGas": 2 * int(block["baseFeePerGas"], 16) + int(tip, 16),
                "maxPriorityFeePerGas": int(tip, 16),
            }
            raws = legs(sender, int(nonce, 16), fees)
            return [rpc("eth_sendRawTransaction", "0x" + raw.hex()) for raw in raws]

        sides = [
            Turns("treasury org.transfers.create (deposit)", treasury_deposit, 0),
            Turns("bare web3.py, the same 2 transactions (floor)", web3_deposit, 5),
            Turns("bare web3.py, 1 ERC-20 transfer (not the same work)", web3_transfer, 4),
            Turns("bare JSON-RPC on httpx, the same 2 transactions", rpc_deposit, 3),
        ]
        for side in sides:  # warm up (not counted)
            for _ in range(args.deposits):
                side.hashes += side.operation()
        node_seconds, requests, timed_ops = 0.0, 0, 0
        print(f"timing {args.rounds} rounds of {args.deposits} deposits per side ...", flush=True)
        for r in range(args.rounds):
            k = r % len(sides)
            for side in sides[k:] + sides[:k]:
                before_s, before_n = transport.seconds, transport.requests
                start = time.perf_counter()
                for _ in range(args.deposits):
                    side.hashes += side.operation()
                side.per_op.append((time.perf_counter() - start) / args.deposits)
                if side is sides[0]:
                    node_seconds += transport.seconds - before_s
                    requests += transport.requests - before_n
                    timed_ops += args.deposits
        sides[0].requests = round(requests / timed_ops)
        check_deposits(t, org.id, transfer_ids, sides, rpc, addresses, wallet, keys, total * 2)
    report_deposits(args, sides, node_seconds / timed_ops)


def check_deposits(
    t: Treasury,
    org_id: str,
    transfer_ids: list[str],
    sides: list[Turns],
    rpc: Rpc,
    addresses: dict[str, str],
    wallet: str,
    keys: dict[str, Any],
    funded: int,
) -> None:
    """Every transfer submitted with its two legs, every transaction successful, and each
    sender's USDC down by exactly what it sent (`funded` whole USDC each at the start)."""
    with t.storage.read() as tx:
        statuses = tx.query(
            "SELECT status, count(*) AS n FROM transfers WHERE org_id = ? GROUP BY status",
            (org_id,),
        )
        library_hashes = [
            row["hash"]
            for row in tx.query(
                "SELECT hash FROM transfer_legs WHERE sent = 1 ORDER BY transfer_id, position"
            )
        ]
    if {r["status"]: r["n"] for r in statuses} != {"submitted": len(transfer_ids)}:
        raise RuntimeError(f"transfers not all submitted: {statuses}")
    if len(library_hashes) != 2 * len(transfer_ids):
        raise RuntimeError(f"{len(library_hashes)} legs sent for {len(transfer_ids)} deposits")
    hashes = library_hashes + [h for side in sides[1:] for h in side.hashes]
    for start in range(0, len(hashes), 500):
        chunk = hashes[start : start + 500]
        receipts = rpc.batch([("eth_getTransactionReceipt", [h]) for h in chunk])
        if any(r is None or r["status"] != "0x1" for r in receipts):
            raise RuntimeError("a transaction has no receipt or failed")
    senders = {"library": wallet, **{name: k.address for name, k in keys.items()}}
    sent = {
        "library": len(transfer_ids),
        **{
            s: len(sides[i + 1].hashes) // (2 if s != "web3 transfer" else 1)
            for i, s in enumerate(keys)
        },
    }
    for name, address in senders.items():
        data = calldata("balanceOf(address)", address)
        balance = int(
            rpc("eth_call", {"to": addresses["USDC"], "data": "0x" + data.hex()}, "latest"), 16
        )
        expected_left = (funded - sent[name]) * RAW
        if balance != expected_left:
            raise RuntimeError(f"{name}: USDC balance {balance}, expected {expected_left}")


def report_deposits(args: argparse.Namespace, sides: list[Turns], node_seconds: float) -> None:
    lib, floor = sides[0], sides[1]
    rounds = [f"r{i + 1}" for i in range(args.rounds)]
    rows = [
        [
            s.name,
            str(s.requests),
            *(f"{x * 1e3:.1f}" for x in s.per_op),
            f"{median(s.per_op) * 1e3:.1f}",
        ]
        for s in sides
    ]
    print()
    print(
        f"Deposits on anvil (auto-mining), {args.deposits} per side per round, ms per operation"
        " (mean of the round); JSON-RPC HTTP requests per operation"
    )
    print(table(["", "requests", *rounds, "median"], rows))
    library_ms = median(lib.per_op) * 1e3
    print(
        f"treasury: {node_seconds * 1e3:.1f} ms of its {library_ms:.1f} ms per deposit in its"
        f" {lib.requests} JSON-RPC requests (sent, answered, read)"
    )
    print()

    def ratio(other: Turns) -> float:
        return median([o / t for o, t in zip(other.per_op, lib.per_op, strict=True)])

    print(
        f"treasury per deposit: {library_ms:.1f} ms; floor (web3.py, same 2 transactions): {median(floor.per_op) * 1e3:.1f} ms"
    )
    print(
        f"ratio time (floor/treasury): {ratio(floor):.2f} (above 1: the library is faster than the floor)"
    )
    print(
        f"ratio time (web3.py 1 ERC-20 transfer/treasury): {ratio(sides[2]):.2f} (information: half the transactions)"
    )
    print(
        f"ratio time (JSON-RPC on httpx, same 2 transactions/treasury): {ratio(sides[3]):.2f} (information)"
    )


# --- running ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("feed", "deposits"), help="run one part only")
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="transfers in the feed (default 1,000,000)"
    )
    parser.add_argument("--limit", type=int, default=50, help="rows per timed page (default 50)")
    parser.add_argument(
        "--depth",
        type=float,
        default=0.9,
        help="where the deep page is, as a fraction of the feed (default 0.9)",
    )
    parser.add_argument(
        "--repeat", type=int, default=200, help="repetitions of each page (default 200)"
    )
    parser.add_argument(
        "--deposits", type=int, default=20, help="deposits per side per round (default 20)"
    )
    parser.add_argument("--rounds", type=int, default=6, help="rounds of deposits (default 6)")
    parser.add_argument(
        "--dir", default=None, help="where the temporary directory goes (default: system temp)"
    )
    args = parser.parse_args(argv)
    if args.rows < 2 * WALK_LIMIT or not 1 <= args.limit <= 200 or not 0 < args.depth < 1:
        parser.error(f"--rows must be >= {2 * WALK_LIMIT}, --limit 1..200, --depth in (0, 1)")
    if min(args.repeat, args.deposits, args.rounds) < 1:
        parser.error("--repeat, --deposits and --rounds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp:
        if args.only in (None, "feed"):
            bench_feed(args, Path(tmp))
        if args.only in (None, "deposits"):
            bench_deposits(args, Path(tmp))
    print(f"(whole run: {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
