"""Slow readers: another client's latency on `treasury serve` while 8 clients ask for a
150,000-row list (~26 MB) and never read a byte of it, against the same client's latency
on the same server with no such clients (the floor), in one run.

    .venv/bin/python benchmarks/slow_readers.py [--rows N] [--slow S] [--requests K]
                                                [--rounds R]

N recipients (default 150,000) are written straight into the ``recipients`` table of a
treasury's SQLite file by one ``INSERT … SELECT`` through its storage. The server is
``treasury serve --no-worker`` (waitress as shipped, 8 threads), a real subprocess on
that file, started once; ``send_timeout_s`` is raised to 600 so that no slow client is
dropped during a measurement (the worst case: they hold their connections throughout),
and the rate limit so that no request is refused (the limiter still runs).

Each round has two phases, in alternating order:

* ``floor``: no slow client; the other client (one keep-alive ``httpx.Client``) sends K
  requests (default 30), one after another: a read (``GET /v1/policy``, a row of the
  same store) and a write (``POST /v1/recipients``, a row added to the list the slow
  clients are reading), in turn.
* ``slow``: S sockets (default 8), each with a 4 KiB receive buffer, send ``GET
  /v1/recipients`` (the whole list) and never read; once each has its answer's first
  bytes and ``--settle`` seconds (default 3) have passed (their answers have filled every
  buffer on the way), the other client sends the same K requests. The sockets are closed
  after the phase.

Every answer must be 200 (or 201); a slow client that got no answer is an error. Printed:
each phase's latencies per request kind (median, p99, max, pooled over the rounds), the
ratio p99 slow / p99 floor, and the delay (p99 slow - p99 floor) against the goal, 1 s
(DESIGN: "8 such clients on a 26 MB list must not delay other requests by more than
1 s"); and the server's RSS after each phase. The process exits 0 whatever the figures:
this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from _common import free_port, machine, median, memory, random_address, table

from treasury import Treasury

GOAL_DELAY_S = 1.0
MASTER_KEY = "0" * 64
PHASES = ("floor", "slow")
KINDS = ("read", "write")

BUILD = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
INSERT INTO recipients (org_id, number, address, label, created_at, updated_at, pointed_at)
SELECT ?, i, '0x' || printf('%040x', i), 'Vendor number ' || printf('%06d', i), ?, ?, ? FROM n
"""


def build(db: Path, rows: int) -> str:
    """A treasury file with one organization of `rows` recipients; its API key."""
    t = Treasury.open(f"sqlite:///{db}", master_key=MASTER_KEY, chains={})
    try:
        org = t.admin.create_organization("Slow readers")
        key = t.admin.create_api_key(org.id, user_id="bench")
        handle = t.for_api_key(key.secret)
        first = handle.recipients.create(address="0x" + "f" * 40, label="first")
        handle.recipients.delete(first.id)  # its stored times, for the rows below
        with t.storage.read() as tx:
            stamp = tx.one("SELECT created_at FROM recipients WHERE org_id = ?", (org.id,))
        assert stamp is not None
        at = stamp["created_at"]
        with t.storage.transaction() as tx:
            tx.execute("DELETE FROM recipients WHERE org_id = ?", (org.id,))
            tx.execute(BUILD, (rows, org.id, at, at, at))
        with t.storage.read() as tx:  # the rows' pages out of the WAL, before measuring
            tx.one("PRAGMA wal_checkpoint(TRUNCATE)")
        return key.secret
    finally:
        t.close()


@contextmanager
def treasury_serve(workdir: Path, db: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``treasury serve --no-worker`` on `db` in a process of its own; its ``/v1`` URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    env.update(
        TREASURY_STORAGE=f"sqlite:///{db}",
        TREASURY_MASTER_KEY=MASTER_KEY,
        TREASURY_SEND_TIMEOUT_S="600",
        TREASURY_RATE_LIMIT="10000000/1 second",  # raised: no 429 (the limiter still runs)
        PYTHONPATH=os.pathsep.join(sys.path),
    )
    log = (workdir / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "treasury.cli", "serve", "--port", str(port), "--no-worker"],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{base}/yield/artifacts", timeout=5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("treasury serve did not start: see serve.log") from None
                time.sleep(0.1)
        yield process, base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def never_reading(base: str, secret: str) -> socket.socket:
    """A connection that asks for the whole list and reads nothing (a 4 KiB buffer)."""
    host, port = base.removeprefix("http://").removesuffix("/v1").split(":")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, int(port)))
    s.sendall(f"GET /v1/recipients HTTP/1.1\r\nHost: x\r\nx-api-key: {secret}\r\n\r\n".encode())
    return s


def answered(s: socket.socket, within: float) -> None:
    """The answer's first bytes are there (peeked: still unread), else an error."""
    s.settimeout(within)
    head = s.recv(12, socket.MSG_PEEK)
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"a slow client's answer: {head!r}")


@dataclass
class Phase:
    name: str
    waits: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    rss: int = 0


def other_client(base: str, secret: str, requests: int, phase: Phase) -> None:
    """The other client's K requests, one after another, each timed."""
    with httpx.Client(base_url=base, headers={"x-api-key": secret}, timeout=120) as client:
        client.get("/policy").raise_for_status()  # connected
        for number in range(requests):
            kind = KINDS[number % 2]
            started = time.perf_counter()
            if kind == "read":
                answer = client.get("/policy")
            else:
                answer = client.post(
                    "/recipients",
                    json={"address": random_address(), "label": "Payee"},
                    headers={"Idempotency-Key": os.urandom(8).hex()},
                )
            phase.waits[kind].append(time.perf_counter() - started)
            if answer.status_code not in (200, 201):
                raise RuntimeError(f"{phase.name}: HTTP {answer.status_code}: {answer.text}")


def run_phase(
    name: str, process: subprocess.Popen[bytes], base: str, secret: str, args: argparse.Namespace
) -> Phase:
    phase = Phase(name)
    slow: list[socket.socket] = []
    try:
        if name == "slow":
            slow = [never_reading(base, secret) for _ in range(args.slow)]
            for s in slow:
                answered(s, 60)
            time.sleep(args.settle)
        other_client(base, secret, args.requests, phase)
        phase.rss = memory(process.pid)["VmRSS"]
    finally:
        for s in slow:
            s.close()
    time.sleep(1)  # the server lets go of the closed connections
    return phase


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def report(args: argparse.Namespace, phases: list[Phase]) -> None:
    def pooled(name: str, kind: str) -> list[float]:
        return [w for p in phases if p.name == name for w in p.waits[kind]]

    ms = 1000
    rows = []
    for kind in KINDS:
        for name in PHASES:
            waits = pooled(name, kind)
            rows.append(
                [
                    f"{kind} ({name})",
                    str(len(waits)),
                    f"{median(waits) * ms:.1f}",
                    f"{percentile(waits, 0.99) * ms:.1f}",
                    f"{max(waits) * ms:.1f}",
                ]
            )
    print()
    print(
        f"Another client's requests with {args.slow} clients never reading a list of"
        f" {args.rows:,} rows (slow) and with none (floor), ms; {args.rounds} round(s)"
    )
    print(table(["", "requests", "median", "p99", "max"], rows))
    mb = 1024 * 1024
    for name in PHASES:
        rss = [p.rss / mb for p in phases if p.name == name]
        print(f"server RSS after the {name} phases: " + ", ".join(f"{r:.0f} MB" for r in rss))
    print()
    for kind in KINDS:
        floor, slow = pooled("floor", kind), pooled("slow", kind)
        ratio = percentile(slow, 0.99) / percentile(floor, 0.99)
        delay = percentile(slow, 0.99) - percentile(floor, 0.99)
        verdict = "PASS" if delay <= GOAL_DELAY_S else "ABOVE GOAL"
        print(
            f"{kind}: ratio p99 (slow/floor) {ratio:.2f}; delay p99 {delay * ms:.0f} ms,"
            f" max {max(slow) * ms:.0f} ms (goal: delay <= {GOAL_DELAY_S:.0f} s) {verdict}"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=150_000, help="recipients (default 150,000)")
    parser.add_argument("--slow", type=int, default=8, help="clients never reading (default 8)")
    parser.add_argument(
        "--requests", type=int, default=30, help="the other client's per phase (default 30)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both phases (default 3)")
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds the slow clients stall first"
    )
    parser.add_argument("--dir", default=None, help="where the temporary directory goes")
    args = parser.parse_args(argv)
    if min(args.rows, args.slow, args.requests, args.rounds) < 1:
        parser.error("--rows, --slow, --requests and --rounds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp:
        workdir = Path(tmp)
        db = workdir / "slow.db"
        secret = build(db, args.rows)
        with treasury_serve(workdir, db) as (process, base):
            with httpx.Client(headers={"x-api-key": secret}, timeout=120) as probe:
                whole = probe.get(f"{base}/recipients")  # warm, and its size
                whole.raise_for_status()
            other_client(base, secret, 10, Phase("warm-up"))  # unmeasured
            print(
                f"GET /v1/recipients: {len(whole.content) / 1024 / 1024:.1f} MB;"
                f" treasury serve --no-worker (waitress, 8 threads), send_timeout_s 600"
            )
            phases = []
            for number in range(args.rounds):
                order = PHASES if number % 2 == 0 else PHASES[::-1]
                for name in order:
                    phases.append(run_phase(name, process, base, secret, args))
    report(args, phases)
    print(f"(whole run: {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
