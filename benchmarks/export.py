"""Export: the server's memory while it answers ``GET /v1/transfers/export`` of 100,000
transfers as CSV, against the same export of 1,000 (the floor: what any answer costs).

    .venv/bin/python benchmarks/export.py [--rows N] [--small S] [--clients C] [--rounds R]

N transfers (default 100,000), one a second, are written straight into the ``transfers``
table of a treasury's SQLite file by one ``INSERT … SELECT`` through its storage (every
row the sides of one real transfer, its own id, times and hash). The server is `treasury
serve`'s (waitress as ``treasury.http._server`` sets it up, 8 threads) on that file, in a
process of its own, started afresh for each measurement, answering one of three exports:

* ``small``: the first S transfers (default 1,000), streamed as shipped. The floor.
* ``streamed``: all N, streamed as shipped: read from a storage cursor 500 rows at a time
  and written as CSV as they come (``Operation.chunks``, ``Operation.csv``).
* ``whole``: all N, the CSV made whole before it is sent (every row fetched at once, the
  document joined), restored in the server process: what streaming saves.

Two figures. **Heap**: in this process, the peak of Python's allocations (`tracemalloc`)
while one export is read to its end through the WSGI app (no server, no threads: only
what the export holds), N against S, after one small export (imports, caches). **RSS**:
one measurement is, after one small request (imports done, pools open), the server's RSS
(``VmRSS`` in /proc); then C clients (threads here, one connection each) ask for the
export at the same moment and read it to the end; the growth is the server's peak RSS
over the run (``VmHWM``) minus that RSS. Every answer is checked: the same bytes for every
client, the header and one line per transfer. The modes alternate over ``--rounds``
rounds; the figures are the medians. Flat memory: the heap peak of N within 1.5x of
S's (RSS also holds SQLite's page cache and each thread's allocator arena, bounded but
not nothing: its ratio is shown, not judged). The process exits 0 whatever the figures: this is a measurement, not a
test; a wrong answer is an error.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

from _common import machine, median, memory, serve_store, start_server, table

from treasury import Treasury

MASTER_KEY = "0" * 64
MODES = ("small", "streamed", "whole")
FLAT = 1.5  # streamed growth within this factor of the small export's
START = datetime(2030, 1, 1, tzinfo=UTC)

BUILD = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
INSERT INTO transfers (id, org_id, pairing, status, stage, amount, developer_fee, source,
    destination, chain_id, wallet_address, transaction_hash, created_at, updated_at)
SELECT printf('%08x-0000-4000-8000-%012x', i, i), ?, 'deposit', 'completed', 'recorded',
    '1', '0', ?, ?, 31337, ?, '0x' || printf('%064x', i),
    strftime('%Y-%m-%dT%H:%M:%S', ?, '+' || i || ' seconds') || '.000000+00:00',
    strftime('%Y-%m-%dT%H:%M:%S', ?, '+' || i || ' seconds') || '.000000+00:00'
FROM n
"""


def build(db: Path, rows: int) -> str:
    """A treasury file with one organization of `rows` transfers; its API key."""
    from treasury.transfers.operations import onchain_side

    t = Treasury.open(f"sqlite:///{db}", master_key=MASTER_KEY, chains={})
    try:
        org = t.admin.create_organization("Export")
        key = t.admin.create_api_key(org.id, user_id="bench")
        wallet = "0x" + "ab" * 20
        source = onchain_side(wallet, 31337, "usdc", "1")
        destination = onchain_side(wallet, 31337, "c0", "1")
        origin = START.strftime("%Y-%m-%dT%H:%M:%S")
        with t.storage.transaction() as tx:
            tx.execute(BUILD, (rows, org.id, source, destination, wallet, origin, origin))
        return key.secret
    finally:
        t.close()


# --- the server process -----------------------------------------------------------------


def restore_whole_export() -> None:
    """In this process: the CSV made whole from rows fetched at once, then sent."""
    from treasury.backends.storage import sqlite
    from treasury.backends.storage.base import Transaction
    from treasury.http import _blueprint

    streamed = _blueprint._csv_body

    def whole(*args):  # type: ignore[no-untyped-def]
        return iter([b"".join(streamed(*args))])

    _blueprint._csv_body = whole  # type: ignore[assignment]
    sqlite._Tx._stream = Transaction._stream  # type: ignore[method-assign]


def serve(mode: str, db: str, port: int) -> None:
    if mode == "whole":
        restore_whole_export()
    serve_store(db, port, MASTER_KEY)


# --- measuring --------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    mode: str
    growth: int  # bytes
    seconds: float
    body_bytes: int


def measure_once(mode: str, db: Path, secret: str, rows: int, clients: int) -> Run:
    process, port = start_server(__file__, mode, db, "/policy", secret)
    try:
        before = memory(process.pid)["VmRSS"]
        end = START + timedelta(seconds=rows + 1)
        query = urlencode({"from": START.isoformat(), "to": end.isoformat()})
        bodies: list[bytes] = [b""] * clients
        start = threading.Barrier(clients + 1)

        def fetch(i: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            start.wait()
            conn.request("GET", f"/v1/transfers/export?{query}", headers={"x-api-key": secret})
            answer = conn.getresponse()
            if answer.status != 200:
                raise RuntimeError(f"{mode}: HTTP {answer.status}")
            bodies[i] = answer.read()
            conn.close()

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        start.wait()
        began = time.perf_counter()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - began
        peak = memory(process.pid)["VmHWM"]
        lines = bodies[0].splitlines()
        if len(set(bodies)) != 1 or len(lines) != rows + 1 or not lines[0].startswith(b"id,"):
            raise RuntimeError(f"{mode}: the answers differ or miss rows")
        return Run(mode, peak - before, seconds, len(bodies[0]))
    finally:
        process.terminate()
        process.wait(timeout=30)


def heap_peak(db: Path, secret: str, rows: int) -> tuple[int, int]:
    """The peak of Python's allocations while one export of `rows` is read through the
    WSGI app, in bytes, and the bytes answered."""
    import tracemalloc

    from treasury.http import create_app

    t = Treasury.open(f"sqlite:///{db}", master_key=MASTER_KEY, chains={})
    try:
        app = create_app(t).test_client()
        end = START + timedelta(seconds=rows + 1)
        query = {"from": START.isoformat(), "to": end.isoformat()}

        def read_all() -> int:
            answer = app.get(
                "/v1/transfers/export",
                query_string=query,
                headers={"x-api-key": secret},
                buffered=False,
            )
            size = sum(len(part) for part in answer.response)
            answer.close()
            return size

        read_all()  # warm: imports, the models' validators, the connection
        tracemalloc.start()
        size = read_all()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return peak, size
    finally:
        t.close()


def report(args: argparse.Namespace, runs: list[Run], heaps: dict[str, int]) -> None:
    mb = 1024 * 1024

    def of(mode: str) -> list[Run]:
        return [r for r in runs if r.mode == mode]

    rows = [
        [
            f"{mode} ({of(mode)[0].body_bytes / mb:.1f} MB)",
            *(f"{r.growth / mb:.1f}" for r in of(mode)),
            f"{median([r.growth / mb for r in of(mode)]):.1f}",
            f"{median([r.seconds for r in of(mode)]):.2f}",
        ]
        for mode in MODES
    ]
    rounds = [f"round {i + 1}" for i in range(args.rounds)]
    print()
    print(
        f"GET /v1/transfers/export of {args.small:,} (small) and {args.rows:,} transfers,"
        f" {args.clients} clients at once: server RSS growth, MB; seconds for all answers"
    )
    print(table(["", *rounds, "median", "seconds"], rows))
    small, streamed, whole = (median([r.growth for r in of(mode)]) for mode in MODES)
    heap = heaps["streamed"] / heaps["small"]
    print()
    print(
        f"heap peak of one export (tracemalloc): {args.small:,}: {heaps['small'] / mb:.2f} MB,"
        f" {args.rows:,}: {heaps['streamed'] / mb:.2f} MB; ratio {heap:.2f}"
        f" ({'FLAT' if heap <= FLAT else 'NOT FLAT'}, goal <= {FLAT})"
    )
    print(
        f"RSS growth ratio (streamed {args.rows:,} / small {args.small:,}):"
        f" {streamed / max(small, 1):.2f}; whole {args.rows:,}: {whole / mb:.1f} MB"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="transfers (default 100,000)")
    parser.add_argument("--small", type=int, default=1_000, help="the floor's (default 1,000)")
    parser.add_argument("--clients", type=int, default=4, help="clients at once (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the modes (default 3)")
    parser.add_argument("--dir", default=None, help="where the temporary directory goes")
    parser.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)  # the server process
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.rows, args.small, args.clients, args.rounds) < 1:
        parser.error("--rows, --small, --clients and --rounds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.serve, args.db, args.port)
        return 0
    started = time.perf_counter()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp:
        large, small = Path(tmp) / "export.db", Path(tmp) / "small.db"
        secrets = {large: build(large, args.rows), small: build(small, args.small)}
        sizes = {"small": (small, args.small), "streamed": (large, args.rows)}
        sizes["whole"] = sizes["streamed"]
        heaps = {
            "small": heap_peak(small, secrets[small], args.small)[0],
            "streamed": heap_peak(large, secrets[large], args.rows)[0],
        }
        runs = []
        for _ in range(args.rounds):
            for mode in MODES:
                db, rows = sizes[mode]
                runs.append(measure_once(mode, db, secrets[db], rows, args.clients))
    report(args, runs, heaps)
    print(f"(whole run: {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
