"""Lists: the server's memory while it answers ``GET /v1/recipients`` of 50,000 rows to 8
clients at once, the list streamed from the store in chunks vs built whole.

    .venv/bin/python benchmarks/lists.py [--rows N] [--clients C] [--rounds R]

N recipients (default 50,000) are written straight into the ``recipients`` table of a
treasury's SQLite file by one ``INSERT … SELECT`` through its storage. The server is
`treasury serve`'s (waitress as ``treasury.http._server`` sets it up, 8 threads) on that
file, in a process of its own, started afresh for each measurement, in one of two modes:

* ``streamed``: as shipped. The list is read from a storage cursor 500 rows at a time and
  written to the client as it comes (``Operation.chunks``, ``Transaction.stream``).
* ``whole``: the path before streaming, restored in the server process: every row
  fetched at once (``fetchall``), every model built, the whole JSON answer made, then
  sent. This is the floor the figure is compared with.

One measurement: after one small request (imports done, pools open), the server's RSS
(``VmRSS`` in /proc); then C clients (threads here, one connection each) ask for the
whole list at the same moment and read it to the end; the growth is the server's peak RSS
over the run (``VmHWM``) minus that RSS. Every answer is checked: the same bytes for every
client, ``count`` equal to N. The modes alternate over ``--rounds`` rounds; the figures
are the medians. Goal: growth under 50 MB streamed. The process exits 0 whatever the
figures: this is a measurement, not a test; a wrong answer is an error.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import machine, median, memory, serve_store, start_server, table

from treasury import Treasury

GOAL_MB = 50
MASTER_KEY = "0" * 64
MODES = ("whole", "streamed")

BUILD = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
INSERT INTO recipients (org_id, number, address, label, created_at, updated_at)
SELECT ?, i, '0x' || printf('%040x', i), 'Recipient ' || i, ?, ? FROM n
"""


def build(db: Path, rows: int) -> str:
    """A treasury file with one organization of `rows` recipients; its API key."""
    t = Treasury.open(f"sqlite:///{db}", master_key=MASTER_KEY, chains={})
    try:
        org = t.admin.create_organization("Lists")
        key = t.admin.create_api_key(org.id, user_id="bench")
        handle = t.for_api_key(key.secret)
        first = handle.recipients.create(address="0x" + "f" * 40, label="first")
        handle.recipients.delete(first.id)  # its stored times, for the rows below
        with t.storage.read() as tx:
            stamp = tx.one("SELECT created_at FROM recipients WHERE org_id = ?", (org.id,))
        assert stamp is not None
        with t.storage.transaction() as tx:
            tx.execute("DELETE FROM recipients WHERE org_id = ?", (org.id,))
            tx.execute(BUILD, (rows, org.id, stamp["created_at"], stamp["created_at"]))
        assert handle.recipients.list().count == rows
        return key.secret
    finally:
        t.close()


# --- the server process -----------------------------------------------------------------


def restore_whole_lists() -> None:
    """In this process: lists built whole, from rows fetched at once (the path before)."""
    from treasury import operations
    from treasury.backends.storage import sqlite
    from treasury.backends.storage.base import Transaction
    from treasury.http import _blueprint

    table = tuple(  # a CSV answer is only ever streamed: it keeps its chunks
        op if op.csv is not None else dataclasses.replace(op, chunks=None)
        for op in operations.OPERATIONS
    )
    operations.OPERATIONS = _blueprint.OPERATIONS = table  # type: ignore[misc]
    sqlite._Tx._stream = Transaction._stream  # type: ignore[method-assign]


def serve(mode: str, db: str, port: int) -> None:
    if mode == "whole":
        restore_whole_lists()
    serve_store(db, port, MASTER_KEY)


# --- measuring --------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    mode: str
    growth: int  # bytes
    seconds: float
    body_bytes: int


def measure_once(mode: str, db: Path, secret: str, rows: int, clients: int) -> Run:
    process, port = start_server(__file__, mode, db, "/wallets", secret)
    try:
        before = memory(process.pid)["VmRSS"]
        bodies: list[bytes] = [b""] * clients
        start = threading.Barrier(clients + 1)

        def fetch(i: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            start.wait()
            conn.request("GET", "/v1/recipients", headers={"x-api-key": secret})
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
        if len(set(bodies)) != 1 or json.loads(bodies[0])["count"] != rows:
            raise RuntimeError(f"{mode}: the answers differ or miss rows")
        return Run(mode, peak - before, seconds, len(bodies[0]))
    finally:
        process.terminate()
        process.wait(timeout=30)


def report(args: argparse.Namespace, runs: list[Run]) -> None:
    mb = 1024 * 1024

    def of(mode: str) -> list[Run]:
        return [r for r in runs if r.mode == mode]

    rows = [
        [
            mode,
            *(f"{r.growth / mb:.1f}" for r in of(mode)),
            f"{median([r.growth / mb for r in of(mode)]):.1f}",
            f"{median([r.seconds for r in of(mode)]):.2f}",
        ]
        for mode in MODES
    ]
    rounds = [f"round {i + 1}" for i in range(args.rounds)]
    print()
    print(
        f"GET /v1/recipients of {args.rows:,} rows ({runs[0].body_bytes / mb:.1f} MB),"
        f" {args.clients} clients at once: server RSS growth, MB; seconds for all answers"
    )
    print(table(["", *rounds, "median", "seconds"], rows))
    whole = median([r.growth for r in of("whole")])
    streamed = median([r.growth for r in of("streamed")])
    print()
    print(
        f"streamed: {streamed / mb:.1f} MB (goal < {GOAL_MB} MB:"
        f" {'PASS' if streamed < GOAL_MB * mb else 'ABOVE GOAL'});"
        f" whole (the floor to beat): {whole / mb:.1f} MB"
    )
    print(f"ratio growth (streamed/whole): {streamed / whole:.2f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50_000, help="recipients (default 50,000)")
    parser.add_argument("--clients", type=int, default=8, help="clients at once (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both modes (default 3)")
    parser.add_argument("--dir", default=None, help="where the temporary directory goes")
    parser.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)  # the server process
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.rows, args.clients, args.rounds) < 1:
        parser.error("--rows, --clients and --rounds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.serve, args.db, args.port)
        return 0
    started = time.perf_counter()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp:
        db = Path(tmp) / "lists.db"
        secret = build(db, args.rows)
        runs = [
            measure_once(mode, db, secret, args.rows, args.clients)
            for _ in range(args.rounds)
            for mode in MODES
        ]
    report(args, runs)
    print(f"(whole run: {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
