"""Creating recipients: treasury against a bare SQLite insert+commit, over HTTP and in-process.

    .venv/bin/python benchmarks/recipients.py [--seconds S | --requests N] [--rounds R]
                                              [--writers W]

Two ratios, measured in one run (goal for both: >= 0.5), then the figures of ``W``
concurrent writers (default 8; ``--writers 0`` skips them): writers.py's measurement,
run from here (throughput ratio >= 0.5, p99 ratio <= 1.5; see writers.py):

* http: ``POST /v1/recipients`` (x-api-key, a fresh Idempotency-Key and a fresh random
  address per request) through waitress on loopback, against a bare Flask app whose one
  endpoint does one SQLite insert+commit. Same waitress settings, the same keep-alive
  ``httpx.Client``, requests sent one after another (for concurrent writers, see
  writers.py).
* in-process: ``org.recipients.create(..., idempotency_key=...)`` against a raw ``sqlite3``
  insert+commit. ``create`` without a key is printed as extra information.

The floor (both the raw insert and the bare endpoint) writes a row of the shape of
treasury's ``recipients`` table (``_common.FLOOR_SCHEMA``: migration 8, rows kept in
their (org_id, number) key WITHOUT ROWID, the foreign key to ``organizations`` enforced,
UNIQUE (org_id, address)): one ``INSERT`` of all its columns, then ``COMMIT``. What it
does not do: read its number from the table (it comes from an in-process counter),
validate input, authenticate, rate-limit, or record an idempotency key; all of that is
treasury's cost. Printed as extras: a raw insert whose number comes from treasury's own
statement (``MAX(number) + 1`` of the organization) in the same transaction, to show
what per-organization numbers cost alone; a raw insert that also sends the audit log's
two statements as treasury sends them, to show what the audit log's SQL costs alone
before any Python (an event's row and its organization's chain head: two more B-trees
in the commit); and the pages one in-process operation writes to the WAL on each side
(`pages_written`): with synchronous=FULL every page is part of what the commit waits
for, so on a disk that is slow per byte the pages, more than the statements, set the
in-process ratio.

Every side writes a real file in one temporary directory with the same durability
settings (WAL, synchronous=FULL). Each side is warmed up; then, in each of ``--rounds``
rounds, the sides take ``--slices`` short turns in rotating order, so slow spells of the
disk land on every side alike. A ratio is the median of the per-round ratios. The process
exits 0 whatever the figures: this is a measurement, not a test. ``--profile`` then runs
treasury's paths under cProfile, and once more timing each SQL statement (BEGIN and the
durable COMMIT included), and prints where the time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _common import (
    FLOOR_INSERT,
    FLOOR_ORG_ID,
    WAITRESS_THREADS,
    FloorNumbers,
    Sample,
    create_floor_schema,
    durable_connection,
    machine,
    measure,
    median,
    now_text,
    print_profile,
    random_address,
    table,
    verdict,
    waitress_server,
    warm_up,
)
from flask import Flask, Response, jsonify, request

from treasury import OrganizationHandle, Treasury
from treasury._infra import audit
from treasury._infra.migrations import MIGRATIONS
from treasury.backends.storage.sqlite import SQLiteStorage, _sha256_hex
from treasury.http import create_app

GOAL = 0.5
MASTER_KEY = "0" * 64
# The default limit (100 per 60 seconds per key) would answer 429 within a second; the
# limiter still runs on every request, only its ceiling is out of reach.
RATE_LIMIT = "10000000/1 second"
LABEL = "Benchmark recipient"
# treasury's statement for the next per-organization number (_infra/sql.py:insert_numbered)
NEXT_NUMBER = "SELECT COALESCE(MAX(number), 0) + 1 FROM recipients WHERE org_id = ?"


@dataclass
class Side:
    """One contender: its operation and the samples of every round."""

    name: str
    operation: Callable[[], Any]
    samples: list[Sample] = field(default_factory=list)

    @property
    def median_per_second(self) -> float:
        return median([s.per_second for s in self.samples])


# --- in-process -------------------------------------------------------------------------


def open_treasury(path: Path) -> Treasury:
    return Treasury.open(f"sqlite:///{path}", master_key=MASTER_KEY, rate_limit=RATE_LIMIT)


def raw_insert(
    path: Path, *, counter: bool = False, audited: bool = False
) -> tuple[Callable[[], None], Callable[[], None]]:
    """One raw sqlite3 insert+commit of a recipient row (`FLOOR_SCHEMA`); and a closer.

    The number comes from an in-process counter; with `counter`, from treasury's
    ``MAX(number) + 1`` statement in the same transaction instead. With `audited`, the
    transaction also sends the audit log's two statements (`audit_log`: what the audit
    log's SQL costs alone, before any Python). Both are extras, not the floor.
    """
    create_floor_schema(str(path))
    conn = durable_connection(str(path))
    numbers = FloorNumbers()
    send_event = audit_log(conn) if audited else None

    def insert() -> None:
        now = now_text()
        if counter:
            number = conn.execute(NEXT_NUMBER, (FLOOR_ORG_ID,)).fetchone()[0]
        else:
            number = numbers.next()
        conn.execute(FLOOR_INSERT, (FLOOR_ORG_ID, number, random_address(), LABEL, now, now))
        if send_event is not None:
            send_event(number, now)
        conn.commit()

    return insert, conn.close


def audit_log(conn: sqlite3.Connection) -> Callable[[int, str], None]:
    """Give `conn` treasury's audit tables (its migrations' statements for them, replayed
    in order) and its ``sha256_hex``; return what sends the audit log's two statements,
    as treasury sends them, for a recipient's event (its number, its time). The event's
    text around its previous hash is spelled once, here."""
    conn.create_function("sha256_hex", 1, _sha256_hex, deterministic=True)
    with conn:
        for _, _, statements in MIGRATIONS:
            for statement in statements:
                if "audit_" in statement and (sql := statement.format(**SQLiteStorage.types)):
                    conn.execute(sql)
    before, after = audit._around_previous(
        {
            "id": "aud_0",
            "at": now_text(),
            "actor": {"admin": True},
            "operation": "recipients.create",
            "objectType": "recipient",
            "objectId": "1",
            "status": 201,
            "requestId": None,
            "prevHash": "",
        }
    )
    key = b"k" * 32

    def send(number: int, now: str) -> None:
        head = conn.execute(audit._TAKE_HEAD, (FLOOR_ORG_ID, audit.GENESIS)).fetchone()
        seq, previous = head[0] + 1, head[1]
        digest = audit.keyed_hash(key, before + previous + after)
        conn.execute(audit._ADVANCE_HEAD, (seq, previous, digest, FLOOR_ORG_ID))
        event = (f"aud_{number}", now, '{"admin":true}', "recipients.create", "recipient")
        conn.execute(
            audit._COPY_EVENT,
            (FLOOR_ORG_ID, seq, *event, str(number), 201, None, previous, digest),
        )

    return send


def treasury_create(org: OrganizationHandle, *, keyed: bool) -> Callable[[], None]:
    def create() -> None:
        org.recipients.create(
            address=random_address(),
            label=LABEL,
            idempotency_key=uuid.uuid4().hex if keyed else None,
        )

    return create


def pages_written(path: Path, operation: Callable[[], Any], operations: int = 50) -> float:
    """The pages one `operation` writes to the WAL of the database at `path` (frames per
    operation: with synchronous=FULL, each is part of what the commit waits for). The WAL
    is emptied first; `operations` stay under the automatic checkpoint (1,000 frames)."""
    with closing(sqlite3.connect(path)) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wal = Path(f"{path}-wal")
        before = wal.stat().st_size if wal.exists() else 0
        for _ in range(operations):
            operation()
        return (wal.stat().st_size - before) / (page + 24) / operations  # a frame's header


# --- HTTP -------------------------------------------------------------------------------


def bare_app(path: Path) -> tuple[Flask, Callable[[], None]]:
    """A Flask app with one endpoint: one insert+commit on a per-thread connection."""
    create_floor_schema(str(path))
    numbers = FloorNumbers()
    local = threading.local()
    connections: list[Any] = []
    lock = threading.Lock()

    def connection() -> Any:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = durable_connection(str(path), check_same_thread=False)
            with lock:
                connections.append(conn)
        return conn

    app = Flask("bare")

    @app.post("/v1/recipients")
    def create() -> tuple[Response, int]:
        body = request.get_json()
        now = now_text()
        conn = connection()
        number = numbers.next()
        conn.execute(FLOOR_INSERT, (FLOOR_ORG_ID, number, body["address"], body["label"], now, now))
        conn.commit()
        row = {
            "id": number,
            "address": body["address"].lower(),
            "label": body["label"],
            "createdAt": now,
            "updatedAt": now,
        }
        return jsonify(row), 201

    def close() -> None:
        with lock:
            for conn in connections:
                conn.close()

    return app, close


def http_post(client: httpx.Client, url: str) -> Callable[[], None]:
    def post() -> None:
        response = client.post(
            url,
            json={"address": random_address(), "label": LABEL},
            headers={"Idempotency-Key": uuid.uuid4().hex},
        )
        if response.status_code != 201:
            raise RuntimeError(f"POST {url}: {response.status_code} {response.text}")

    return post


# --- running ----------------------------------------------------------------------------


def run_rounds(sides: list[Side], args: argparse.Namespace) -> None:
    """Warm every side up, then `--rounds` rounds of `--slices` interleaved slices.

    A slice gives each side a short turn (the order rotates), so slow spells of the disk
    or the machine land on every side alike; a round adds up its slices per side.
    """
    for side in sides:
        warm_up(side.operation, args.warmup)
    for _ in range(args.rounds):
        totals = {side.name: Sample(0, 0.0) for side in sides}
        for slice_ in range(args.slices):
            shift = slice_ % len(sides)
            for side in sides[shift:] + sides[:shift]:
                sample = measure(
                    side.operation,
                    seconds=args.seconds / args.slices,
                    requests=share(args.requests, args.slices, slice_),
                )
                totals[side.name] += sample
        for side in sides:
            side.samples.append(totals[side.name])


def share(requests: int | None, slices: int, index: int) -> int | None:
    """Slice `index`'s part of `requests` (the first slices take the remainder)."""
    if requests is None:
        return None
    return requests // slices + (1 if index < requests % slices else 0)


def ratio(contender: Side, baseline: Side) -> float:
    """The median over rounds of contender/baseline throughput in the same round."""
    return median(
        [
            c.per_second / b.per_second
            for c, b in zip(contender.samples, baseline.samples, strict=True)
        ]
    )


def report(title: str, sides: list[Side], rounds: int) -> str:
    header = ["", *(f"round {i + 1}" for i in range(rounds)), "median ops/s", "us/op"]
    rows = [
        [
            side.name,
            *(f"{s.per_second:,.0f}" for s in side.samples),
            f"{side.median_per_second:,.0f}",
            f"{1e6 / side.median_per_second:,.0f}",
        ]
        for side in sides
    ]
    return f"{title}\n{table(header, rows)}"


@contextmanager
def live_sides(workdir: Path, client: httpx.Client) -> Iterator[tuple[list[Side], list[Side]]]:
    with ExitStack() as stack:
        # in-process
        insert, close_raw = raw_insert(workdir / "raw.db")
        stack.callback(close_raw)
        counted, close_counted = raw_insert(workdir / "raw-counter.db", counter=True)
        stack.callback(close_counted)
        audited, close_audited = raw_insert(workdir / "raw-audited.db", audited=True)
        stack.callback(close_audited)
        local = stack.enter_context(open_treasury(workdir / "treasury-inprocess.db"))
        org = local.for_organization(local.admin.create_organization("Bench").id)
        in_process = [
            Side("raw sqlite3 insert+commit", insert),
            Side("treasury create, idempotency key", treasury_create(org, keyed=True)),
            Side("treasury create, no key", treasury_create(org, keyed=False)),
            Side("raw, number from MAX(number)+1", counted),
            Side("raw + the audit log's statements", audited),
        ]
        # HTTP
        served = stack.enter_context(open_treasury(workdir / "treasury-http.db"))
        tenant = served.admin.create_organization("Bench")
        secret = served.admin.create_api_key(tenant.id, user_id="bench").secret
        bare, close_bare = bare_app(workdir / "bare-http.db")
        stack.callback(close_bare)
        bare_url = stack.enter_context(waitress_server(bare))
        treasury_url = stack.enter_context(waitress_server(create_app(served)))
        stack.callback(client.close)  # drop keep-alive connections before the servers stop
        client.headers["x-api-key"] = secret  # sent to both servers alike
        http = [
            Side("bare Flask + sqlite3", http_post(client, f"{bare_url}/v1/recipients")),
            Side(
                "treasury POST /v1/recipients", http_post(client, f"{treasury_url}/v1/recipients")
            ),
        ]
        yield in_process, http


class Profiled:
    """WSGI middleware: runs each request under `profiler` when one is set."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.profiler: cProfile.Profile | None = None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        profiler = self.profiler
        if profiler is None:
            return list(self.app(environ, start_response))
        profiler.enable()  # requests come one at a time, so one profiler is never shared
        try:
            return list(self.app(environ, start_response))
        finally:
            profiler.disable()


def profile(workdir: Path, in_process: list[Side], args: argparse.Namespace) -> None:
    """Where treasury's time goes: cProfile, and the wall time of each SQL statement."""
    for side in in_process[1:3]:
        profiler = cProfile.Profile()
        profiler.runcall(measure, side.operation, seconds=args.seconds, requests=args.requests)
        print_profile(f"in-process, {side.name}", profiler)
        with sql_timer() as spent:
            sample = measure(side.operation, seconds=args.seconds, requests=args.requests)
        print_sql(f"in-process, {side.name}", spent, sample)
    # HTTP: a separate server whose app is wrapped, so the measured server ran unwrapped.
    # cProfile sees the server side only (the WSGI call in a waitress thread).
    with ExitStack() as stack:
        served = stack.enter_context(open_treasury(workdir / "treasury-profile.db"))
        tenant = served.admin.create_organization("Bench")
        secret = served.admin.create_api_key(tenant.id, user_id="bench").secret
        app = Profiled(create_app(served))
        url = stack.enter_context(waitress_server(app))
        client = stack.enter_context(httpx.Client(headers={"x-api-key": secret}, timeout=30.0))
        post = http_post(client, f"{url}/v1/recipients")
        warm_up(post, args.warmup)
        app.profiler = cProfile.Profile()
        measure(post, seconds=args.seconds, requests=args.requests)
        profiler, app.profiler = app.profiler, None
        print_profile("HTTP, server side of treasury POST /v1/recipients", profiler)
        with sql_timer() as spent:
            sample = measure(post, seconds=args.seconds, requests=args.requests)
        print_sql(
            "HTTP, treasury POST /v1/recipients (share of the client's wall time)", spent, sample
        )


class TimedConnection:
    """A stand-in for a ``sqlite3.Connection`` that times each ``execute`` (the first
    step of a statement, which does all the work of the one-row statements here) and
    passes everything else through."""

    def __init__(self, inner: Any, record: Callable[[str, float], None]) -> None:
        self.inner = inner
        self._record = record

    def execute(self, sql: str, *params: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.inner.execute(sql, *params)
        finally:
            self._record(sql, time.perf_counter() - start)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextmanager
def sql_timer() -> Iterator[dict[str, list[float]]]:
    """Time every statement treasury's SQLite storage runs, by its first words.

    The storage's thread connections are wrapped in `TimedConnection` as it hands them
    out (`SQLiteStorage._db`, a private method, patched for the duration), so its own
    ``BEGIN``/``COMMIT`` count as well as every other statement.
    """
    spent: dict[str, list[float]] = {}
    begun = ["BEGIN"]  # what the open transaction began with (requests come one at a time)

    def label(sql: str) -> str:
        words = sql.replace("(", " ").split()
        if words[0] == "BEGIN":
            begun[0] = " ".join(words[:2])
        if words[0] == "COMMIT":
            return f"COMMIT of {begun[0]}"
        if words[0] == "SELECT" and "FROM" in words:
            return f"SELECT FROM {words[words.index('FROM') + 1]}"
        return " ".join(words[:3] if words[0] in ("INSERT", "DELETE") else words[:2])

    def record(sql: str, seconds: float) -> None:
        spent.setdefault(label(sql), []).append(seconds)

    original = SQLiteStorage._db

    def timed_db(storage: SQLiteStorage) -> Any:
        return TimedConnection(original(storage), record)

    SQLiteStorage._db = timed_db  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        SQLiteStorage._db = original  # type: ignore[method-assign]


def print_sql(title: str, spent: dict[str, list[float]], sample: Sample) -> None:
    rows = sorted(spent.items(), key=lambda item: -sum(item[1]))
    in_sql = sum(sum(times) for times in spent.values())
    print(f"\n=== SQL statements, {title}: {sample.ops} operations, no profiler ===")
    print(
        table(
            ["statement", "per op", "us each", "share of wall time"],
            [
                [
                    label,
                    f"{len(times) / sample.ops:.2f}",
                    f"{sum(times) / len(times) * 1e6:,.0f}",
                    f"{sum(times) / sample.seconds:.1%}",
                ]
                for label, times in rows
            ]
            + [["all SQL", "", "", f"{in_sql / sample.seconds:.1%}"]],
        )
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="seconds per side per round (default 2)"
    )
    parser.add_argument(
        "--requests", type=int, default=None, help="a fixed number of operations per side per round"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3; median taken)")
    parser.add_argument(
        "--slices",
        type=int,
        default=10,
        help="interleaved turns per side per round (default 10)",
    )
    parser.add_argument(
        "--warmup", type=float, default=0.5, help="warm-up seconds per side (default 0.5)"
    )
    parser.add_argument(
        "--dir", default=None, help="where the temporary directory goes (default: system temp)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="afterwards, cProfile treasury's two paths"
    )
    parser.add_argument(
        "--writers",
        type=int,
        default=8,
        help="then the figures of this many concurrent writers (writers.py; 0: skip them)",
    )
    args = parser.parse_args(argv)
    if min(args.rounds, args.slices, args.requests or 1) < 1 or args.seconds <= 0:
        parser.error("--rounds, --slices, --requests and --seconds must be positive")
    if args.writers < 0:
        parser.error("--writers must be 0 or more")
    if args.requests is not None:
        args.slices = min(args.slices, args.requests)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    budget = f"{args.requests} operations" if args.requests else f"{args.seconds:g} s"
    with tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp:
        workdir = Path(tmp)
        print(f"{machine()}; databases in {workdir}")
        print(
            f"{args.rounds} round(s) x {budget} per side, {args.warmup:g} s warm-up per side;"
            " every database: WAL, synchronous=FULL, real file"
        )
        print(f"treasury's rate limit is raised to {RATE_LIMIT!r} (the limiter still runs)")
        with httpx.Client(timeout=30.0) as client, live_sides(workdir, client) as sides:
            in_process, http = sides
            run_rounds(in_process, args)
            run_rounds(http, args)
            print()
            print(
                report("In-process (one thread, one operation at a time)", in_process, args.rounds)
            )
            print()
            print(
                report(
                    f"HTTP (waitress threads={WAITRESS_THREADS} on 127.0.0.1, one keep-alive"
                    " httpx.Client, sequential requests)",
                    http,
                    args.rounds,
                )
            )
            pages = {
                side.name: pages_written(workdir / name, side.operation)
                for side, name in (
                    (in_process[0], "raw.db"),
                    (in_process[1], "treasury-inprocess.db"),
                )
            }
            if args.profile:
                profile(workdir, in_process, args)

    http_ratio = ratio(http[1], http[0])
    keyed_ratio = ratio(in_process[1], in_process[0])
    unkeyed_ratio = ratio(in_process[2], in_process[0])
    counter_ratio = ratio(in_process[3], in_process[0])
    audited = in_process[4]
    audit_cost = 1e6 / audited.median_per_second - 1e6 / in_process[0].median_per_second
    print()
    print(
        "Requests are sent one at a time by a single client (no concurrency): the figures"
        " are latency-bound,\nso each ratio compares the cost of one request, fsync included."
    )
    print(
        f"extra: in-process without idempotency key: {unkeyed_ratio:.2f} of raw;"
        f" the key costs {1 - keyed_ratio / unkeyed_ratio:.0%} of keyless throughput"
    )
    print(f"extra: raw insert with its number from MAX(number)+1: {counter_ratio:.2f} of raw")
    print(
        f"extra: raw insert + the audit log's two statements: {ratio(audited, in_process[0]):.2f}"
        f" of raw; the audit log's SQL alone adds {audit_cost:,.0f} us per operation"
        f" ({audit_cost / (1e6 / in_process[1].median_per_second):.0%} of treasury's keyed create)"
    )
    print(
        "extra: pages a commit writes (WAL frames per operation, in-process): "
        + ", ".join(f"{name} {count:.2f}" for name, count in pages.items())
    )
    print(f"ratio http: {http_ratio:.2f} (goal >= {GOAL}) {verdict(http_ratio, GOAL)}")
    print(f"ratio in-process: {keyed_ratio:.2f} (goal >= {GOAL}) {verdict(keyed_ratio, GOAL)}")
    if args.writers:
        import writers  # only here: it needs today's storage (FairLock), and --writers 0 not

        print()
        print(f"=== {args.writers} concurrent writers over HTTP (writers.py, run from here) ===")
        writers.main(["--writers", str(args.writers), *(["--dir", args.dir] if args.dir else [])])
    return 0


if __name__ == "__main__":
    sys.exit(main())
