"""Webhook delivery throughput: the dispatcher draining N queued deliveries, against bare
httpx POSTing the same signed bodies to the same receiver with the same concurrency.

    .venv/bin/python benchmarks/webhooks.py [--events N] [--rounds R]

The receiver is a real threaded HTTP/1.1 server on loopback in a separate process
(``_receiver.py``, standard library only), so that it takes no GIL time from the sender.
It checks the Standard Webhooks signature of every delivery, answers 204, and counts
deliveries, distinct ``webhook-id`` values and bad signatures.

* treasury: one webhook registered (``org.webhooks.create``) at the receiver; N
  ``transaction.confirmed`` events written through the library's outbox
  (``treasury._records.events.emit``: the event row and its delivery, in one transaction,
  as the indexer writes them; not timed), then one ``t.run_once()`` is timed: its
  ``deliver_webhooks`` job claims the due deliveries under a lease in batches of
  ``POOL``, sends each batch through a pool of ``POOL`` threads over keep-alive
  connections (``urllib3.PoolManager``; each attempt signed for its timestamp), and
  records each batch in one transaction. The other jobs of the pass find nothing to do (no chain is
  configured). Every delivery must end ``delivered``.
* the floor: the same N bodies (``{"type", "timestamp", "data"}`` of the same events),
  each signed for its attempt with the same headers (``webhook-id``,
  ``webhook-timestamp``, ``webhook-signature``, ``X-Webhook-Signature``), POSTed by a
  ``ThreadPoolExecutor(POOL)`` over one ``httpx.Client`` with the dispatcher's limits,
  timeout and redirect setting; the client and the pool are made inside the timed
  region, as the job makes its own on every pass. No storage at all. The issue names
  bare httpx as the floor; for information, the same POSTs over a bare
  ``urllib3.PoolManager`` (the dispatcher's own client) are measured too, and their
  ratio says what the outbox, the signing and the recording cost.

Both sides write and read nothing else; the database is a real file with treasury's
settings (WAL, synchronous=FULL). After a warm-up of each side, the sides take
``--rounds`` turns in rotating order; deliveries/s is N / the turn's wall time, and the
ratio (treasury / floor) is the median of the per-round ratios. Goals: >= 1,000
deliveries/s and a ratio >= 0.7. The process exits 0 whatever the figures: this is a
measurement, not a test; a wrong result (a delivery not received, received twice, badly
signed, or not recorded as delivered) is an error.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import http.client
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import urllib3
from _common import machine, median, now_text, random_address, table, verdict

from treasury import OrganizationHandle, Treasury
from treasury._records.events import emit
from treasury.transactions.models import Transaction
from treasury.webhooks import dispatcher
from treasury.webhooks.dispatcher import POOL, TIMEOUT

GOAL_RATE = 1_000.0  # deliveries/s
GOAL_RATIO = 0.7
MASTER_KEY = "0" * 64
RECEIVER = Path(__file__).with_name("_receiver.py")
EVENT = "transaction.confirmed"
USER_AGENT = "treasury-webhooks/1"  # as the dispatcher's
EXTRA_POOL = 8  # the smaller pool of --extras


# --- the receiver -----------------------------------------------------------------------


class Receiver:
    """`_receiver.py` in its own process; `stats` and `reset` over a plain httpx client."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(RECEIVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.strip():
            raise RuntimeError("the receiver did not start")
        self.url = f"http://127.0.0.1:{int(line)}"
        self.client = httpx.Client(base_url=self.url, timeout=10.0)

    def set_secret(self, secret: str) -> None:
        self.client.put("/secret", content=secret.encode()).raise_for_status()

    def stats(self) -> dict[str, int]:
        answer = self.client.get("/stats")
        answer.raise_for_status()
        stats: dict[str, int] = answer.json()
        return stats

    def reset(self) -> None:
        self.client.post("/reset").raise_for_status()

    def close(self) -> None:
        self.client.close()
        assert self.process.stdin is not None
        self.process.stdin.close()  # the receiver's signal to stop
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def check_received(receiver: Receiver, expected: int, side: str) -> None:
    stats = receiver.stats()
    if stats != {"received": expected, "unique": expected, "bad_signatures": 0}:
        raise RuntimeError(f"{side}: the receiver got {stats}, expected {expected} once each")
    receiver.reset()


# --- the events -------------------------------------------------------------------------


def transaction_data(org_id: str, wallet: str, now: str) -> dict[str, Any]:
    """A `transaction.confirmed` event's data, as the indexer writes it (a fresh hash)."""
    tx_hash = "0x" + secrets.token_hex(32)
    contract = random_address()
    return Transaction.model_validate(
        {
            "hash": tx_hash,
            "chain_id": 31337,
            "status": "confirmed",
            "type": "deposit",
            "from": wallet,
            "contract": contract,
            "token": contract,
            "amount": "1000000",
            "organization_id": org_id,
            "wallet_id": 1,
            "created_at": now,
            "updated_at": now,
            "receipt": {
                "chain_id": 31337,
                "hash": tx_hash,
                "from": wallet,
                "to": contract,
                "transaction_index": 0,
                "block_hash": "0x" + secrets.token_hex(32),
                "block_number": 1234,
                "type": 2,
                "contract_address": "",
                "status": 1,
                "root": "",
                "created_at": now,
                "updated_at": now,
            },
        }
    ).to_json()


def emit_events(t: Treasury, org: OrganizationHandle, wallet: str, count: int) -> float:
    """`count` events with one delivery each, written as the indexer does (one
    transaction here); the seconds it took."""
    start = time.perf_counter()
    with t.storage.transaction() as tx:
        for _ in range(count):
            now = now_text()
            emit(
                tx,
                org_id=org.id,
                event_type=EVENT,
                wallet_address=wallet,
                data=transaction_data(org.id, wallet, now),
                now=now,
            )
    return time.perf_counter() - start


def floor_bodies(org_id: str, wallet: str, count: int) -> list[tuple[str, bytes]]:
    """(message id, body) of `count` events of the same shape as the outbox's payloads."""
    out = []
    for _ in range(count):
        now = now_text()
        payload = {
            "type": EVENT,
            "timestamp": now.replace("+00:00", "Z"),
            "data": transaction_data(org_id, wallet, now),
        }
        out.append(("msg_" + secrets.token_hex(16), json.dumps(payload).encode()))
    return out


# --- the two sides ----------------------------------------------------------------------


def floor_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Standard Webhooks headers and the original service's, as the dispatcher sends them."""
    key = secret.removeprefix("whsec_")
    standard = hmac.new(
        base64.b64decode(key), f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256
    ).digest()
    original = hmac.new(key.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": "v1," + base64.b64encode(standard).decode(),
        "X-Webhook-Signature": f"t={timestamp},v1={original.hexdigest()}",
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
    }


def floor_send(url: str, secret: str, bodies: list[tuple[str, bytes]], pool_size: int) -> None:
    """POST every body, `pool_size` at once, over one keep-alive client with the
    dispatcher's limits (`POOL` connections), timeout and redirect setting; every answer
    must be 2xx."""
    limits = httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size)

    def send(item: tuple[str, bytes]) -> int:
        message_id, body = item
        headers = floor_headers(secret, message_id, int(time.time()), body)
        return client.post(url, content=body, headers=headers).status_code

    with (
        httpx.Client(timeout=15.0, follow_redirects=False, limits=limits) as client,
        ThreadPoolExecutor(pool_size, thread_name_prefix="floor") as pool,
    ):
        statuses = list(pool.map(send, bodies))
    if any(not 200 <= s < 300 for s in statuses):
        raise RuntimeError(f"the floor got non-2xx answers: {sorted(set(statuses))}")


def check_delivered(t: Treasury, org_id: str, total: int) -> None:
    with t.storage.read() as tx:
        rows = tx.query(
            "SELECT status, count(*) AS n FROM webhook_deliveries WHERE org_id = ? GROUP BY status",
            (org_id,),
        )
    statuses = {row["status"]: row["n"] for row in rows}
    if statuses != {"delivered": total}:
        raise RuntimeError(f"deliveries not all delivered: {statuses} (expected {total})")


def stdlib_send(url: str, secret: str, bodies: list[tuple[str, bytes]], threads: int) -> None:
    """An extra, not the floor: the same POSTs over the standard library's
    `http.client`, one keep-alive connection per thread of the pool."""
    parts = urlsplit(url)
    local = threading.local()
    made: list[http.client.HTTPConnection] = []

    def send(item: tuple[str, bytes]) -> int:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(parts.hostname or "", parts.port)
            made.append(conn)
        message_id, body = item
        headers = floor_headers(secret, message_id, int(time.time()), body)
        conn.request("POST", parts.path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status

    with ThreadPoolExecutor(threads, thread_name_prefix="stdlib") as pool:
        statuses = list(pool.map(send, bodies))
    for conn in made:
        conn.close()
    if any(not 200 <= s < 300 for s in statuses):
        raise RuntimeError(f"http.client got non-2xx answers: {sorted(set(statuses))}")


@contextmanager
def dispatcher_pool(size: int) -> Iterator[None]:
    """The dispatcher's `POOL` set to `size` for a while (an A/B extra; the module reads
    it on every pass: its thread pool, its client's limits, its batch of POOL)."""
    saved = dispatcher.POOL
    dispatcher.POOL = size
    try:
        yield
    finally:
        dispatcher.POOL = saved


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of another process so far; None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Side:
    name: str
    turn: Callable[[int], float]  # deliveries -> wall seconds of the timed part
    rates: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)  # this process's CPU per delivery
    receiver_us: list[float] = field(default_factory=list)  # the receiver's, per delivery


@dataclass(frozen=True)
class Timing:
    seconds: float  # wall
    cpu: float  # this process
    receiver_cpu: float | None


def timed(receiver: Receiver, operation: Callable[[], Any]) -> tuple[Timing, Any]:
    theirs, ours, start = (
        process_cpu(receiver.process.pid),
        time.process_time(),
        time.perf_counter(),
    )
    result = operation()
    seconds, ours = time.perf_counter() - start, time.process_time() - ours
    after = process_cpu(receiver.process.pid)
    return Timing(
        seconds, ours, None if theirs is None or after is None else after - theirs
    ), result


def urllib3_send(url: str, secret: str, bodies: list[tuple[str, bytes]], pool_size: int) -> None:
    """The same POSTs over a bare ``urllib3.PoolManager`` (the dispatcher's client, with its
    settings); every answer must be 2xx."""

    def send(item: tuple[str, bytes]) -> int:
        message_id, body = item
        headers = floor_headers(secret, message_id, int(time.time()), body)
        return manager.request("POST", url, body=body, headers=headers, redirect=False).status

    with (
        urllib3.PoolManager(maxsize=pool_size, retries=False, timeout=TIMEOUT) as manager,
        ThreadPoolExecutor(pool_size, thread_name_prefix="urllib3") as pool,
    ):
        statuses = list(pool.map(send, bodies))
    if any(not 200 <= s < 300 for s in statuses):
        raise RuntimeError(f"bare urllib3 got non-2xx answers: {sorted(set(statuses))}")


def run(args: argparse.Namespace, workdir: Path, receiver: Receiver) -> tuple[list[Side], float]:
    t = Treasury.open(
        f"sqlite:///{workdir}/w.db",
        master_key=MASTER_KEY,
        chains={},  # no chain: the pass's other jobs have nothing to do
        allow_private_webhook_urls=True,  # the receiver is on loopback
    )
    try:
        org = t.for_organization(t.admin.create_organization("Bench webhooks").id)
        wallet = random_address()
        hook = org.webhooks.create(url=receiver.url + "/hook", events=[EVENT])
        receiver.set_secret(hook.secret)
        target = receiver.url + "/hook"
        delivered = 0

        def treasury_turn(count: int, pool: int = POOL) -> Timing:
            nonlocal delivered
            emit_events(t, org, wallet, count)
            with dispatcher_pool(pool):
                timing, summary = timed(receiver, t.run_once)
            if summary.errors or summary["webhooks_delivered"] != count:
                raise RuntimeError(f"the pass delivered {summary.counts}, errors {summary.errors}")
            delivered += count
            check_received(receiver, count, "treasury")
            check_delivered(t, org.id, delivered)
            return timing

        def floor_turn(count: int, pool: int = POOL) -> Timing:
            bodies = floor_bodies(org.id, wallet, count)
            timing, _ = timed(receiver, lambda: floor_send(target, hook.secret, bodies, pool))
            check_received(receiver, count, "floor")
            return timing

        def urllib3_turn(count: int) -> Timing:
            bodies = floor_bodies(org.id, wallet, count)
            timing, _ = timed(receiver, lambda: urllib3_send(target, hook.secret, bodies, POOL))
            check_received(receiver, count, "urllib3")
            return timing

        def stdlib_turn(count: int) -> Timing:
            bodies = floor_bodies(org.id, wallet, count)
            timing, _ = timed(receiver, lambda: stdlib_send(target, hook.secret, bodies, POOL))
            check_received(receiver, count, "http.client")
            return timing

        sides = [
            Side(f"bare httpx, {POOL} threads (floor)", floor_turn),
            Side(f"treasury t.run_once(), POOL={POOL}", treasury_turn),
            Side(f"bare urllib3, {POOL} threads (the dispatcher's client)", urllib3_turn),
        ]
        if args.extras:
            small = EXTRA_POOL
            sides += [
                Side(f"extra: stdlib http.client, {POOL} threads", stdlib_turn),
                Side(f"extra: bare httpx, {small} threads", lambda n: floor_turn(n, small)),
                Side(f"extra: treasury, POOL={small}", lambda n: treasury_turn(n, small)),
            ]
        for side in sides:  # warm up: code paths, connections, the receiver's threads
            side.turn(args.warmup_events)
        for r in range(args.rounds):
            order = sides[r % len(sides) :] + sides[: r % len(sides)]
            for side in order:
                timing = side.turn(args.events)
                side.rates.append(args.events / timing.seconds)
                side.cpu_us.append(timing.cpu / args.events * 1e6)
                if timing.receiver_cpu is not None:
                    side.receiver_us.append(timing.receiver_cpu / args.events * 1e6)
            print(f"  round {r + 1} of {args.rounds} done", flush=True)
        emitting = emit_events(t, org, wallet, args.events)
        return sides, emitting
    finally:
        t.close()


def median_ratio(a: Side, b: Side) -> float:
    """The median over rounds of a's rate / b's rate in the same round."""
    return median([x / y for x, y in zip(a.rates, b.rates, strict=True)])


def report(sides: list[Side], emitting: float, args: argparse.Namespace) -> None:
    floor, lib, bare = sides[:3]
    rounds = [f"r{i + 1}" for i in range(args.rounds)]
    rows = []
    for side in sides:
        rows.append(
            [
                side.name,
                "deliveries/s",
                *(f"{x:,.0f}" for x in side.rates),
                f"{median(side.rates):,.0f}",
            ]
        )
        rows.append(
            [
                "",
                "CPU us/delivery",
                *(f"{x:.0f}" for x in side.cpu_us),
                f"{median(side.cpu_us):.0f}",
            ]
        )
        if side.receiver_us:
            rows.append(
                [
                    "",
                    "receiver CPU us",
                    *(f"{x:.0f}" for x in side.receiver_us),
                    f"{median(side.receiver_us):.0f}",
                ]
            )
    print()
    print(
        f"Draining {args.events:,} deliveries per turn to a receiver on loopback in its own"
        " process (CPU: this process's, and the receiver's, per delivery)"
    )
    print(table(["", "figure", *rounds, "median"], rows))
    print(
        f"(setup, not timed: emitting {args.events:,} events with their deliveries: {emitting:.2f} s)"
    )
    ratio, rate = median_ratio(lib, floor), median(lib.rates)
    print()
    if args.extras:
        stdlib, small_floor, small = sides[3:]
        print(
            f"extra: treasury POOL={EXTRA_POOL} / POOL={POOL}: {median_ratio(small, lib):.2f};"
            f" bare httpx {EXTRA_POOL} / {POOL} threads: {median_ratio(small_floor, floor):.2f}"
        )
        print(
            f"extra: stdlib http.client / bare httpx, {POOL} threads:"
            f" {median_ratio(stdlib, floor):.2f}"
        )
    print(
        f"ratio throughput (treasury/bare urllib3, the same client): {median_ratio(lib, bare):.2f}"
        " (information: what the outbox, signing and recording cost)"
    )
    print(f"floor deliveries/s: {median(floor.rates):,.0f}")
    print(
        f"treasury deliveries/s: {rate:,.0f} (goal >= {GOAL_RATE:,.0f}) {verdict(rate, GOAL_RATE)}"
    )
    print(
        f"ratio throughput (treasury/floor): {ratio:.2f} (goal >= {GOAL_RATIO})"
        f" {verdict(ratio, GOAL_RATIO)}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events", type=int, default=2_000, help="deliveries per turn (default 2,000)"
    )
    parser.add_argument("--rounds", type=int, default=6, help="turns per side (default 6)")
    parser.add_argument(
        "--warmup-events", type=int, default=500, help="deliveries of each side's warm-up turn"
    )
    parser.add_argument(
        "--extras",
        action="store_true",
        help=f"also: stdlib http.client at {POOL} threads; httpx and treasury at {EXTRA_POOL}",
    )
    parser.add_argument("--dir", default=None, help="where the temporary directory goes")
    args = parser.parse_args(argv)
    if min(args.events, args.rounds, args.warmup_events) < 1:
        parser.error("--events, --rounds and --warmup-events must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    print(machine())
    receiver = Receiver()
    try:
        with tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp:
            sides, emitting = run(args, Path(tmp), receiver)
    finally:
        receiver.close()
    report(sides, emitting, args)
    print(f"(whole run: {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
