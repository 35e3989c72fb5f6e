"""Chain: balances of 100 tokens and indexing 10,000 transactions, on a real anvil node.

    .venv/bin/python benchmarks/chain.py [--transactions N] [--block-time S] [--repeat R]
                                         [--profile]

The script starts anvil (``npm ci`` ships it; or ``TREASURY_ANVIL``), deploys our
contracts, and stops the node at the end. Two figures, each against a floor measured in
the same run over the same kind of ``httpx.Client`` (keep-alive, requests one at a time):

* balances: 97 extra ``TestStablecoin`` tokens are deployed besides USDC, USDT and c0 and
  configured as the chain's ``tokens``; the wallet holds some of them.
  ``org.balances.get(31337, address)`` in steady state (the library reads each token's
  name, symbol and decimals once per chain, with the first balances, then only
  ``balanceOf``: one Multicall3 ``aggregate3`` eth_call carrying 100 balanceOf calls and
  a getEthBalance) against the floor: ONE JSON-RPC batch request carrying the same 100
  ``eth_call balanceOf`` calls (goal: floor time / library time >= 1; the library's
  answer also carries the wallet's ETH, which the floor does not read). For information: the
  library's own steady-state request replayed with its answer not decoded (the node's
  share; the rest is the library's Python), 100 single ``eth_call balanceOf``
  requests (the round trips the multicall saves), and the first read of the run (with
  the metadata; one sample). HTTP requests of the library are counted by an event hook
  on the `RpcChain`'s client, and its aggregate3 calldata is decoded to count the calls
  it carries; times are medians over ``--repeat`` interleaved repetitions. The balances
  must equal the floor's answers.
* indexing: N real ETH transfers (default 10,000; pre-signed EIP-1559 transactions from
  several funded accounts with explicit nonces and gas, posted as JSON-RPC batches) are
  recorded with ``org.transactions.record`` against a tracked wallet; then ``t.run_once()``
  is timed and its HTTP round trips to anvil counted (goal: <= 100). Every transaction
  must end ``confirmed`` with one event in the ``events`` table. The floor: one
  ``eth_getTransactionReceipt`` per request for a sample of 500 hashes, extrapolated to N.

Anvil mines a block every ``--block-time`` seconds (default 0.5; the script also mines
blocks with ``evm_mine`` while it waits). Auto-mining is not offered: in that mode anvil
1.7.1 stopped answering batches of ``eth_sendRawTransaction`` (a read timeout after a few
thousand transactions). The process exits 0 whatever the figures: this is a
measurement, not a test; a wrong result (a transaction not confirmed, a missing event,
balances that differ from the floors' answers) is an error.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import coincurve
import httpx
import rlp
from _common import Rpc, machine, median, print_profile, random_address, table, verdict
from eth_abi.abi import decode, encode
from eth_abi.grammar import parse
from eth_utils.crypto import keccak

from treasury import Treasury
from treasury.anvil import DEPLOYER_KEY, AnvilNode, deploy_contracts, start_anvil
from treasury.backends.chain import ChainConfig
from treasury.backends.chain.rpc import RpcChain

CHAIN_ID = 31337
MASTER_KEY = "0" * 64
TIMEOUT = httpx.Timeout(30.0, connect=5.0)  # as RpcChain's own client
EXTRA_TOKENS = 97  # + USDC, USDT, c0 = 100 tokens
SENDERS = 8  # accounts the indexing transactions come from
SEND_BATCH = 500  # raw transactions per JSON-RPC batch request
RECEIPT_SAMPLE = 500  # receipts fetched one per request for the indexing floor
ROUND_TRIP_GOAL = 100
BALANCES_TIME_GOAL = 1.0  # floor time / library time: no slower than one batch
PROFILED_READS = 200  # steady-state balance reads under cProfile (--profile)
TIP = 10**9
NATIVE = "0x" + "00" * 20  # the `token` recorded for an ETH transfer


# --- ABI, JSON-RPC and signing (setup and floors; only the library's public API is used) --


def calldata(signature: str, *args: Any) -> bytes:
    """Selector and ABI-encoded arguments: ``calldata("mint(address,uint256)", to, 5)``."""
    if not args:
        return keccak(text=signature)[:4]
    types = [t.to_type_str() for t in parse(signature[signature.index("(") :]).components]
    return keccak(text=signature)[:4] + encode(types, list(args))


def contract_address(sender: str, nonce: int) -> str:
    """Where ``CREATE`` from `sender` at `nonce` puts a contract (lowercase)."""
    return "0x" + keccak(rlp.encode([bytes.fromhex(sender[2:]), nonce]))[12:].hex()


def creation_code(contract: str) -> bytes:
    """Creation bytecode from the library's compiled artifacts."""
    text = files("treasury.contracts").joinpath("artifacts.json").read_text(encoding="utf-8")
    return bytes.fromhex(json.loads(text)["contracts"][contract]["bytecode"].removeprefix("0x"))


class Signer:
    """EIP-1559 signing with coincurve directly: ~20x faster than eth-account for 10,000
    transactions (checked against eth-account once per run)."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self._private = coincurve.PrivateKey(key)
        public = self._private.public_key.format(compressed=False)[1:]
        self.address = "0x" + keccak(public)[-20:].hex()

    def sign(
        self, nonce: int, to: str | None, *, gas: int, max_fee: int, value: int = 0, data=b""
    ) -> tuple[str, str]:
        """(raw transaction as 0x hex, its hash)."""
        fields = [
            CHAIN_ID,
            nonce,
            TIP,
            max_fee,
            gas,
            bytes.fromhex(to[2:]) if to else b"",
            value,
            data,
            [],
        ]
        signature = self._private.sign_recoverable(
            keccak(b"\x02" + rlp.encode(fields)), hasher=None
        )
        r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:64], "big")
        raw = b"\x02" + rlp.encode([*fields, signature[64], r, s])
        return "0x" + raw.hex(), "0x" + keccak(raw).hex()


def check_signer(signer: Signer, max_fee: int) -> None:
    from eth_account import Account

    to = Account.from_key(signer.key).address  # checksummed, as eth-account wants
    if to.lower() != signer.address:
        raise RuntimeError("the benchmark's signer derives another address than eth-account")
    expected = Account.sign_transaction(
        {
            "type": 2,
            "chainId": CHAIN_ID,
            "nonce": 3,
            "to": to,
            "value": 7,
            "gas": 21_000,
            "maxFeePerGas": max_fee,
            "maxPriorityFeePerGas": TIP,
        },
        signer.key,
    )
    raw, tx_hash = signer.sign(3, to.lower(), gas=21_000, max_fee=max_fee, value=7)
    if raw != "0x" + expected.raw_transaction.hex() or tx_hash != "0x" + expected.hash.hex():
        raise RuntimeError("the benchmark's signer disagrees with eth-account")


def send_raw(rpc: Rpc, signed: Sequence[tuple[str, str]]) -> None:
    """Post raw transactions in batches; every answered hash must be the signed one."""
    for start in range(0, len(signed), SEND_BATCH):
        chunk = signed[start : start + SEND_BATCH]
        answered = rpc.batch([("eth_sendRawTransaction", [raw]) for raw, _ in chunk])
        if [h.lower() for h in answered] != [h for _, h in chunk]:
            raise RuntimeError("anvil answered other transaction hashes than signed")


def wait_mined(rpc: Rpc, nonces: dict[str, int], timeout: float = 60.0) -> None:
    """Until each address's mined nonce reaches its target; mines blocks meanwhile.
    `RuntimeError` when anvil's pool is empty before (it dropped transactions)."""
    deadline = time.monotonic() + timeout
    addresses = list(nonces)
    while time.monotonic() < deadline:
        *mined, pool = rpc.batch(
            [("eth_getTransactionCount", [a, "latest"]) for a in addresses]
            + [("txpool_status", [])]
        )
        if all(int(n, 16) >= nonces[a] for a, n in zip(addresses, mined, strict=True)):
            return
        if int(pool["pending"], 16) + int(pool["queued"], 16) == 0:
            raise RuntimeError("anvil dropped transactions: its pool is empty, nonces behind")
        rpc("evm_mine")
        time.sleep(0.02)
    raise TimeoutError("transactions were not mined in time")


def max_fee(rpc: Rpc) -> int:
    """Far above the base fee, which rises while 10,000 transfers fill blocks."""
    base = int(rpc("eth_getBlockByNumber", "latest", False)["baseFeePerGas"], 16)
    return max(100 * 10**9, 50 * base) + TIP


# --- setup ------------------------------------------------------------------------------


def deploy_tokens(rpc: Rpc, wallet: str) -> list[str]:
    """`EXTRA_TOKENS` TestStablecoins from the deployer, every other one minting a
    distinct amount to `wallet`. Returns their addresses."""
    deployer = Signer(bytes.fromhex(DEPLOYER_KEY[2:]))
    fee = max_fee(rpc)
    nonce = int(rpc("eth_getTransactionCount", deployer.address, "pending"), 16)
    code = creation_code("TestStablecoin")
    creations = [
        code + encode(["string", "string"], [f"Bench Token {i}", f"BT{i}"])
        for i in range(EXTRA_TOKENS)
    ]
    estimated = int(
        rpc("eth_estimateGas", {"from": deployer.address, "data": "0x" + creations[0].hex()}),
        16,
    )
    tokens = [contract_address(deployer.address, nonce + i) for i in range(EXTRA_TOKENS)]
    signed = [
        deployer.sign(nonce + i, None, gas=estimated * 5 // 4, max_fee=fee, data=data)
        for i, data in enumerate(creations)
    ]
    send_raw(rpc, signed)
    nonce += len(signed)
    wait_mined(rpc, {deployer.address: nonce})
    # Minted only once every token exists: anvil 1.7.1 silently dropped the mints when they
    # were queued behind creations filling several blocks.
    mint = "mint(address,uint256)"
    mints = [
        deployer.sign(
            nonce + i,
            token,
            gas=150_000,
            max_fee=fee,
            data=calldata(mint, wallet, (i + 1) * 10**6),
        )
        for i, token in enumerate(tokens[::2])
    ]
    send_raw(rpc, mints)
    wait_mined(rpc, {deployer.address: nonce + len(mints)})
    signed += mints
    receipts = rpc.batch([("eth_getTransactionReceipt", [h]) for _, h in signed])
    if any(r["status"] != "0x1" for r in receipts):
        raise RuntimeError("deploying or minting the extra tokens reverted")
    if [r["contractAddress"].lower() for r in receipts[:EXTRA_TOKENS]] != tokens:
        raise RuntimeError("tokens were deployed at unexpected addresses")
    return tokens


def fund_senders(rpc: Rpc, count: int) -> list[Signer]:
    deployer = Signer(bytes.fromhex(DEPLOYER_KEY[2:]))
    senders = [Signer(random.randbytes(32)) for _ in range(count)]
    fee = max_fee(rpc)
    nonce = int(rpc("eth_getTransactionCount", deployer.address, "pending"), 16)
    signed = [
        deployer.sign(nonce + i, s.address, gas=21_000, max_fee=fee, value=100 * 10**18)
        for i, s in enumerate(senders)
    ]
    send_raw(rpc, signed)
    wait_mined(rpc, {deployer.address: nonce + len(signed)})
    return senders


# --- timing -----------------------------------------------------------------------------


def timed(operation: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = operation()
    return time.perf_counter() - start, result


@dataclass
class Balances:
    rpc_calls: float  # HTTP requests of one steady-state org.balances.get
    calls_per_request: int  # calls inside its aggregate3 (100: balanceOf only)
    first: float  # the first get of the run (also name, symbol, decimals; one sample)
    first_calls: int
    library: float
    batch_100: float
    bare_multicall: float
    single_100: float


def single_calls(rpc: Rpc, calls: list[tuple[str, bytes]]) -> list[bytes]:
    """One eth_call per request, one after another."""
    return [
        bytes.fromhex(rpc("eth_call", {"to": to, "data": "0x" + data.hex()}, "latest")[2:])
        for to, data in calls
    ]


def batched_calls(rpc: Rpc, calls: list[tuple[str, bytes]]) -> list[bytes]:
    """Every eth_call in one JSON-RPC batch request."""
    answers = rpc.batch(
        [("eth_call", [{"to": to, "data": "0x" + data.hex()}, "latest"]) for to, data in calls]
    )
    return [bytes.fromhex(answer[2:]) for answer in answers]


def aggregated_calls(request: httpx.Request) -> int:
    """How many calls the library's ``aggregate3`` eth_call carried."""
    body = json.loads(request.content)
    data = bytes.fromhex(body["params"][0]["data"][2:])
    (calls,) = decode(["(address,bool,bytes)[]"], data[4:])
    return len(calls)


def bench_balances(
    t: Treasury,
    posts: list[httpx.Request],
    floor: Rpc,
    wallet: str,
    repeat: int,
    profile: bool = False,
) -> Balances:
    org = t.for_organization(t.admin.create_organization("Bench balances").id)
    chain = t.chain(CHAIN_ID)
    tokens = list(chain.tokens)
    if len(tokens) != 100:
        raise RuntimeError(f"{len(tokens)} tokens configured, expected 100")
    balance_calls = [(token, calldata("balanceOf(address)", wallet)) for token in tokens]

    def library() -> Any:
        return org.balances.get(CHAIN_ID, wallet)

    # The first read of the chain also fetches each token's name, symbol and decimals,
    # which the library then keeps: one sample, for information.
    posts.clear()
    first_seconds, _ = timed(library)
    if len(posts) != 1:
        raise RuntimeError(f"the first balances read took {len(posts)} HTTP requests")
    first_calls = aggregated_calls(posts[0])

    # The steady state's own request body, replayed as it went over the wire (the payload
    # built once, the answer not decoded): what is left is the node's and the wire's share.
    posts.clear()
    library()
    steady_body = json.loads(posts[-1].content)

    sides: dict[str, Callable[[], Any]] = {
        "library": library,
        "batch_100": lambda: batched_calls(floor, balance_calls),
        "bare_multicall": lambda: floor(steady_body["method"], *steady_body["params"]),
        "single_100": lambda: single_calls(floor, balance_calls),
    }
    for operation in sides.values():  # warm up: connections, code paths, anvil's caches
        operation()
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    posts.clear()
    results: dict[str, Any] = {}
    for rep in range(repeat):  # interleaved, the order rotating
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            seconds, results[name] = timed(sides[name])
            times[name].append(seconds)
    rpc_calls = len(posts) / repeat
    if not rpc_calls:
        raise RuntimeError("no HTTP request counted: is the chain's client the hooked one?")
    calls_per_request = aggregated_calls(posts[-1])

    *listed, native = results["library"].data  # the chain's own coin is listed last
    raw = {b.token: int(b.raw) for b in listed}
    for floor_name in ("batch_100", "single_100"):
        answered = {
            token: int(decode(["uint256"], data)[0])
            for token, data in zip(tokens, results[floor_name], strict=True)
        }
        if len(listed) != 100 or raw != answered:
            raise RuntimeError(f"the library's balances differ from {floor_name}")
    if native.symbol != "ETH" or int(native.raw) != int(
        floor("eth_getBalance", wallet, "latest"), 16
    ):
        raise RuntimeError("the library's ETH balance differs from eth_getBalance")
    if sum(1 for v in raw.values() if v) < EXTRA_TOKENS // 2:
        raise RuntimeError("fewer non-zero balances than minted")
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(PROFILED_READS):
            library()
        profiler.disable()
        print_profile(f"{PROFILED_READS} steady-state org.balances.get", profiler, limit=30)
    return Balances(
        rpc_calls,
        calls_per_request,
        first_seconds,
        first_calls,
        median(times["library"]),
        median(times["batch_100"]),
        median(times["bare_multicall"]),
        median(times["single_100"]),
    )


@dataclass
class Indexing:
    transactions: int
    send: float
    record: float
    run_once: float
    round_trips: int
    receipts_only: float
    receipts_only_posts: int
    floor_sample: float


def bench_indexing(
    t: Treasury, posts: list[httpx.Request], rpc: Rpc, count: int
) -> tuple[Indexing, Any]:
    org = t.for_organization(t.admin.create_organization("Bench indexing").id)
    wallet = random_address()
    wallet_id = org.wallets.track(address=wallet, label="Indexed").wallet.id
    senders = fund_senders(rpc, SENDERS)
    check_signer(senders[0], max_fee(rpc))
    fee = max_fee(rpc)
    signed = [
        senders[i % SENDERS].sign(i // SENDERS, wallet, gas=21_000, max_fee=fee, value=1)
        for i in range(count)
    ]
    send_seconds, _ = timed(lambda: send_raw(rpc, signed))

    def record() -> None:
        for i, (_, tx_hash) in enumerate(signed):
            org.transactions.record(
                CHAIN_ID,
                hash=tx_hash,
                type="other",
                contract=wallet,
                token=NATIVE,
                amount="1",
                walletId=wallet_id,
                **{"from": senders[i % SENDERS].address},
            )

    record_seconds, _ = timed(record)
    per_sender = {s.address: len(range(i, count, SENDERS)) for i, s in enumerate(senders)}
    wait_mined(rpc, per_sender)

    posts.clear()
    run_seconds, summary = timed(t.run_once)
    round_trips = len(posts)
    if not round_trips:
        raise RuntimeError("no HTTP request counted while indexing")
    check_indexed(t, org.id, count, summary)

    hashes = [h for _, h in signed]
    posts.clear()
    receipts_seconds, receipts = timed(lambda: t.chain(CHAIN_ID).receipts(hashes))
    receipts_posts = len(posts)
    if any(r is None or r.status != 1 for r in receipts):
        raise RuntimeError("a receipt is missing or failed")

    sample = random.Random(1).sample(hashes, min(RECEIPT_SAMPLE, count))
    floor_seconds, floor_receipts = timed(
        lambda: [rpc("eth_getTransactionReceipt", h) for h in sample]
    )
    if any(r is None for r in floor_receipts):
        raise RuntimeError("a single receipt look-up found nothing")
    figures = Indexing(
        count,
        send_seconds,
        record_seconds,
        run_seconds,
        round_trips,
        receipts_seconds,
        receipts_posts,
        floor_seconds * count / len(sample),
    )
    return figures, summary


def check_indexed(t: Treasury, org_id: str, count: int, summary: Any) -> None:
    with t.storage.read() as tx:
        statuses = {
            row["status"]: row["n"]
            for row in tx.query(
                "SELECT status, count(*) AS n FROM transactions WHERE org_id = ? GROUP BY status",
                (org_id,),
            )
        }
        events = tx.one(
            "SELECT count(*) AS n FROM events WHERE org_id = ? AND type = ?",
            (org_id, "transaction.confirmed"),
        )
    assert events is not None
    if statuses != {"confirmed": count} or summary["transactions_confirmed"] != count:
        raise RuntimeError(f"not every transaction was confirmed: {statuses}, {summary}")
    if events["n"] != count:
        raise RuntimeError(f"{events['n']} transaction.confirmed events for {count} transactions")


# --- running ----------------------------------------------------------------------------


def run(node: AnvilNode, workdir: Path, args: argparse.Namespace) -> tuple[Balances, Indexing]:
    rpc = Rpc(node.url)
    posts: list[httpx.Request] = []
    client = httpx.Client(timeout=TIMEOUT, event_hooks={"request": [posts.append]})
    try:
        config = deploy_contracts(node.url)
        wallet = random_address()
        tokens = deploy_tokens(rpc, wallet)
        chain = RpcChain(
            ChainConfig.parse(CHAIN_ID, {**config, "tokens": tokens, "confirmations": 0}),
            client=client,
        )
        with Treasury.open(
            f"sqlite:///{workdir}/b.db", master_key=MASTER_KEY, chains={CHAIN_ID: chain}
        ) as t:
            balances = bench_balances(t, posts, rpc, wallet, args.repeat, args.profile)
            indexing, _ = bench_indexing(t, posts, rpc, args.transactions)
        return balances, indexing
    finally:
        client.close()
        rpc.close()


def report(b: Balances, ix: Indexing, args: argparse.Namespace) -> None:
    ms = 1e3
    print()
    print(
        f"Balances of 100 tokens (median of {args.repeat} interleaved repetitions, "
        "sequential requests on one keep-alive httpx.Client)"
    )
    print(
        table(
            ["", "HTTP requests", "calls", "ms"],
            [
                [
                    "org.balances.get (Multicall3 aggregate3), steady state",
                    f"{b.rpc_calls:g}",
                    str(b.calls_per_request),
                    f"{b.library * ms:.1f}",
                ],
                [
                    "  its request body replayed, answer not decoded (node's share)",
                    "1",
                    str(b.calls_per_request),
                    f"{b.bare_multicall * ms:.1f}",
                ],
                [
                    "one JSON-RPC batch of 100 eth_call balanceOf (floor)",
                    "1",
                    "100",
                    f"{b.batch_100 * ms:.1f}",
                ],
                ["100 single eth_call balanceOf", "100", "100", f"{b.single_100 * ms:.1f}"],
                [
                    "(first get of the run: also name/symbol/decimals, 1 sample)",
                    "1",
                    str(b.first_calls),
                    f"{b.first * ms:.1f}",
                ],
            ],
        )
    )
    print()
    print(f"Indexing {ix.transactions:,} pending transactions (ETH transfers, anvil)")
    per_k = 1_000 / ix.transactions
    print(
        table(
            ["", "HTTP requests", "s", "ms per 1,000"],
            [
                [
                    "t.run_once()",
                    str(ix.round_trips),
                    f"{ix.run_once:.2f}",
                    f"{ix.run_once * per_k * ms:.0f}",
                ],
                [
                    "  chain.receipts(all N) alone (batched, no storage)",
                    str(ix.receipts_only_posts),
                    f"{ix.receipts_only:.2f}",
                    f"{ix.receipts_only * per_k * ms:.0f}",
                ],
                [
                    f"single eth_getTransactionReceipt (x{RECEIPT_SAMPLE}, extrapolated)",
                    str(ix.transactions),
                    f"{ix.floor_sample:.2f}",
                    f"{ix.floor_sample * per_k * ms:.0f}",
                ],
                [
                    "(setup) send raw transactions, batches of 500",
                    str(-(-ix.transactions // SEND_BATCH)),
                    f"{ix.send:.2f}",
                    "",
                ],
                [
                    "(setup) org.transactions.record each",
                    "0",
                    f"{ix.record:.2f}",
                    f"{ix.record * per_k * ms:.0f}",
                ],
            ],
        )
    )
    print()
    print(f"ratio rpc calls (single/multicall): {100 / b.rpc_calls:.1f}")
    print(f"ratio time (100 single calls/org.balances.get): {b.single_100 / b.library:.2f}")
    print(
        "ratio time (one batch of 100 balanceOf/org.balances.get):"
        f" {b.batch_100 / b.library:.2f} (goal >= {BALANCES_TIME_GOAL:g}: no slower than the"
        f" floor) {verdict(b.batch_100 / b.library, BALANCES_TIME_GOAL)}"
    )
    print(
        "balances: Python's share (org.balances.get - the node's share):"
        f" {(b.library - b.bare_multicall) * ms:.1f} ms"
    )
    balances_verdict = verdict(1 / b.rpc_calls, 1.0)
    print(
        f"balances rpc calls: {b.rpc_calls:g}, carrying {b.calls_per_request} calls"
        f" (goal 1 per 100 tokens) {balances_verdict}"
    )
    print(
        f"indexing round trips: {ix.round_trips} (goal <= {ROUND_TRIP_GOAL})"
        f" {verdict(ROUND_TRIP_GOAL / ix.round_trips, 1.0)}"
    )
    print(f"ratio goal/round trips: {ROUND_TRIP_GOAL / ix.round_trips:.1f}")
    print(f"indexing time per 1,000 transactions: {ix.run_once * per_k * ms:.0f} ms")
    print(f"ratio time (single receipts/indexing): {ix.floor_sample / ix.run_once:.2f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--transactions", type=int, default=10_000, help="transactions indexed (default 10,000)"
    )
    parser.add_argument(
        "--block-time",
        type=float,
        default=0.5,
        help="anvil seconds per block (default 0.5)",
    )
    parser.add_argument(
        "--repeat", type=int, default=15, help="repetitions of the balance reads (default 15)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help=f"then profile {PROFILED_READS} steady-state balance reads (cProfile)",
    )
    parser.add_argument(
        "--dir", default=None, help="where the temporary directory goes (default: system temp)"
    )
    args = parser.parse_args(argv)
    if args.transactions < 1 or args.repeat < 1 or args.block_time <= 0:
        parser.error("--transactions, --repeat and --block-time must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp,
        start_anvil(block_time=args.block_time) as node,
    ):
        print(f"{machine()}; anvil at {node.url}, a block every {args.block_time:g} s")
        balances, indexing = run(node, Path(tmp), args)
    report(balances, indexing, args)
    print(f"(whole run: {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
