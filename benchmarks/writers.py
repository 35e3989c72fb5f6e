"""8 concurrent writers over HTTP: treasury against a bare Flask + SQLite endpoint.

    .venv/bin/python benchmarks/writers.py [--seconds S] [--rounds R] [--writers W]

Two ratios, measured in one run:

* throughput: requests/s of treasury ÷ requests/s of the floor (goal >= 0.5);
* p99: treasury's 99th-percentile latency ÷ the floor's (goal <= 1.5).

treasury is ``POST /v1/recipients`` (one API key, a fresh Idempotency-Key and a fresh
random address per request) of ``treasury.http.create_app`` on a ``sqlite:///`` file
(WAL, synchronous=FULL, a connection per thread, writers queued on the storage's fair
in-process lock before ``BEGIN IMMEDIATE``). Its rate limit is raised out of reach (the
limiter still runs on every request).

The floor is a bare Flask app with the same route: it parses the JSON body, does one
``INSERT`` of a row of the shape of treasury's ``recipients`` table
(``_common.FLOOR_SCHEMA``; its number from an in-process counter) and ``COMMIT`` on a
per-thread ``sqlite3`` connection with the same settings (WAL, synchronous=FULL,
foreign_keys=ON), and returns the row as JSON with 201. Its writers queue in arrival
order on a lock held around insert+commit (`FifoLock`), the same discipline as
treasury's storage, so that both sides queue alike and the ratios compare what a
request costs, not two queueing policies. The floor does not authenticate, rate-limit,
validate, read its number from the table, or record an idempotency key. With ``--extras``,
two variants of the floor are measured too, for information (the ratios stay against
the FIFO floor): a ``threading.Lock`` around insert+commit (which wakes any waiter), and no lock
at all (SQLite's busy handler alone: a deferred transaction, ``timeout=30``, which
polls the lock with sleeps of 1 to 100 ms).

Both apps run under ``waitress.create_server(app, threads=--server-threads)`` (default 8)
in this process, one at a time under load. The load comes from a separate process,
``_load.py`` (a small wrk: ``--writers`` threads, each with its own keep-alive
``http.client`` connection, sending one request after another for ``--warmup`` +
``--seconds`` seconds and recording the latency of each request completed in the
window). Every response must be 201: failures are counted and printed, never dropped,
and a run with any failure says so next to its ratios. Each side is warmed up with one
load run; then, in each of ``--rounds`` rounds, the sides take one load run each in
rotating order. A ratio is the median of the per-round ratios. The process exits 0
whatever the figures: this is a measurement, not a test. ``--profile`` then runs
treasury's server threads under cProfile (one profiler per thread, merged; wall time,
so waits for the writer lock show) under the same load, and prints where the time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    FLOOR_INSERT,
    FLOOR_ORG_ID,
    FloorNumbers,
    create_floor_schema,
    durable_connection,
    machine,
    median,
    now_text,
    print_profile,
    table,
    waitress_server,
)
from flask import Flask, Response, jsonify, request

from treasury import Treasury
from treasury.backends.storage.sqlite import FairLock
from treasury.http import create_app

THROUGHPUT_GOAL = 0.5
P99_GOAL = 1.5
MASTER_KEY = "0" * 64
# The default limit (100 per 60 seconds per key) would answer 429 within a second.
RATE_LIMIT = "10000000/1 second"
LOAD = Path(__file__).with_name("_load.py")
PATH = "/v1/recipients"


@dataclass
class Run:
    """One load run against one side, as `_load.py` reported it."""

    requests: int
    seconds: float
    latencies: list[float]  # milliseconds, sorted
    sent: int
    failures: dict[str, int]
    examples: list[str]
    server_cpu: float  # CPU seconds of this process (the servers) during the run

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    @property
    def cpu_per_request(self) -> float:
        """Milliseconds of server CPU per request sent (warm-up included)."""
        return self.server_cpu / self.sent * 1e3 if self.sent else math.nan

    def percentile(self, q: float) -> float:
        return percentile(self.latencies, q)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least `q` of the values at or below it."""
    if not sorted_values:
        return math.nan
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


@dataclass
class Side:
    name: str
    url: str
    runs: list[Run] = field(default_factory=list)
    warmup: Run | None = None

    @property
    def failures(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for run in [*self.runs, *([self.warmup] if self.warmup else [])]:
            total.update(run.failures)
        return total

    @property
    def examples(self) -> list[str]:
        return [e for run in [self.warmup, *self.runs] if run for e in run.examples][:5]


# --- the apps ---------------------------------------------------------------------------


# The floor queues its writers in arrival order, as treasury's storage does: the same lock.
FifoLock = FairLock


class TimedLock:
    """Wraps a writer lock: how long each writer waited for it, and held it (--profile)."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.waits: list[float] = []
        self.holds: list[float] = []
        self._since = threading.local()

    def acquire(self) -> None:
        asked = time.perf_counter()
        self.lock.acquire()
        self._since.value = now = time.perf_counter()
        self.waits.append(now - asked)

    def release(self) -> None:
        self.holds.append(time.perf_counter() - self._since.value)
        self.lock.release()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


QUEUES: dict[str, Callable[[], Any] | None] = {
    "fifo": FifoLock,
    "lock": threading.Lock,
    "busy": None,
}


def bare_app(path: Path, *, queue: str, lock: Any = None) -> tuple[Flask, Callable[[], None]]:
    """The floor: one insert+commit per request on a per-thread connection, the writers
    queued (`QUEUES`) on a `FifoLock` ("fifo") or a `threading.Lock` ("lock") held around
    insert+commit, or only by SQLite's busy handler ("busy": a deferred transaction,
    ``timeout=30``). `lock`, if given, is the writers' lock instead."""
    create_floor_schema(str(path))
    numbers = FloorNumbers()
    local = threading.local()
    connections: list[Any] = []
    registry = threading.Lock()
    make_lock = QUEUES[queue]
    writers = lock if lock is not None else make_lock() if make_lock is not None else None

    def connection() -> Any:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = durable_connection(str(path), check_same_thread=False, timeout=30)
            with registry:
                connections.append(conn)
        return conn

    def write(values: tuple[Any, ...]) -> None:
        conn = connection()
        conn.execute(FLOOR_INSERT, values)
        conn.commit()

    app = Flask("bare")

    @app.post("/v1/recipients")
    def create() -> tuple[Response, int]:
        body = request.get_json()
        now = now_text()
        number = numbers.next()
        values = (FLOOR_ORG_ID, number, body["address"], body["label"], now, now)
        if writers is None:
            write(values)
        else:
            with writers:
                write(values)
        row = {
            "id": number,
            "address": body["address"].lower(),
            "label": body["label"],
            "createdAt": now,
            "updatedAt": now,
        }
        return jsonify(row), 201

    def close() -> None:
        with registry:
            for conn in connections:
                conn.close()

    return app, close


class Profiled:
    """WSGI middleware: with `profiling` set, each server thread profiles its requests
    into its own cProfile.Profile (cProfile sees one thread); merged afterwards."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.profiling = False
        self.profilers: list[cProfile.Profile] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if not self.profiling:
            return list(self.app(environ, start_response))
        profiler = getattr(self._local, "profiler", None)
        if profiler is None:
            profiler = self._local.profiler = cProfile.Profile()
            with self._lock:
                self.profilers.append(profiler)
        profiler.enable()
        try:
            return list(self.app(environ, start_response))
        finally:
            profiler.disable()


# --- running ----------------------------------------------------------------------------


def load(url: str, headers: dict[str, str], args: argparse.Namespace, seconds: float) -> Run:
    """One run of `_load.py` against `url`, in its own process."""
    command = [
        sys.executable,
        str(LOAD),
        url,
        "--threads",
        str(args.writers),
        "--seconds",
        str(seconds),
        "--warmup",
        str(args.warmup),
        *(arg for name, value in headers.items() for arg in ("-H", f"{name}:{value}")),
    ]
    cpu = time.process_time()
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    cpu = time.process_time() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"_load.py exited {done.returncode}: {done.stderr}")
    result = json.loads(done.stdout)
    return Run(
        requests=result["requests"],
        seconds=result["seconds"],
        latencies=sorted(us / 1e3 for us in result["latencies_us"]),
        sent=result["sent"],
        failures=result["failures"],
        examples=result["examples"],
        server_cpu=cpu,
    )


def run_rounds(sides: list[Side], headers: dict[str, str], args: argparse.Namespace) -> None:
    for side in sides:
        side.warmup = load(side.url, headers, args, 1.0)
    for round_ in range(args.rounds):
        shift = round_ % len(sides)
        for side in sides[shift:] + sides[:shift]:
            side.runs.append(load(side.url, headers, args, args.seconds))


def ratio(values: Callable[[Run], float], contender: Side, baseline: Side) -> float:
    """The median over rounds of contender/baseline of one figure in the same round."""
    return median(
        [values(c) / values(b) for c, b in zip(contender.runs, baseline.runs, strict=True)]
    )


def report(sides: list[Side], args: argparse.Namespace) -> str:
    rounds = [f"r{i + 1}" for i in range(args.rounds)]
    header = ["", "figure", *rounds, "median", "all rounds"]
    rows = []
    for side in sides:
        pooled = sorted(x for run in side.runs for x in run.latencies)
        total = sum(run.requests for run in side.runs)
        seconds = sum(run.seconds for run in side.runs)
        failures = sum(side.failures.values())
        sent = sum(run.sent for run in side.runs) + (side.warmup.sent if side.warmup else 0)
        rows += [
            [
                side.name,
                "requests/s",
                *(f"{r.per_second:,.0f}" for r in side.runs),
                f"{median([r.per_second for r in side.runs]):,.0f}",
                f"{total / seconds:,.0f}",
            ],
            [
                "",
                "p50 ms",
                *(f"{r.percentile(0.5):.1f}" for r in side.runs),
                f"{median([r.percentile(0.5) for r in side.runs]):.1f}",
                f"{percentile(pooled, 0.5):.1f}",
            ],
            [
                "",
                "p99 ms",
                *(f"{r.percentile(0.99):.1f}" for r in side.runs),
                f"{median([r.percentile(0.99) for r in side.runs]):.1f}",
                f"{percentile(pooled, 0.99):.1f}",
            ],
            [
                "",
                "server CPU ms/req",
                *(f"{r.cpu_per_request:.2f}" for r in side.runs),
                f"{median([r.cpu_per_request for r in side.runs]):.2f}",
                f"{sum(r.server_cpu for r in side.runs) / sum(r.sent for r in side.runs) * 1e3:.2f}",
            ],
            [
                "",
                "max ms",
                *(f"{r.latencies[-1]:.1f}" if r.latencies else "-" for r in side.runs),
                "",
                f"{pooled[-1]:.1f}" if pooled else "-",
            ],
            [
                "",
                "non-201",
                *(str(sum(r.failures.values())) for r in side.runs),
                "",
                f"{failures} of {sent:,}",  # every request sent, warm-up runs included
            ],
        ]
    return table(header, rows)


@contextmanager
def live_sides(workdir: Path, args: argparse.Namespace) -> Iterator[tuple[list[Side], str, Any]]:
    with ExitStack() as stack:
        served = stack.enter_context(
            Treasury.open(
                f"sqlite:///{workdir / 'treasury.db'}", master_key=MASTER_KEY, rate_limit=RATE_LIMIT
            )
        )
        tenant = served.admin.create_organization("Bench")
        secret = served.admin.create_api_key(tenant.id, user_id="bench").secret
        threads = args.server_threads
        variants = [("fifo", "bare Flask + sqlite3 (floor)")]
        if args.extras:
            variants += [
                ("lock", "extra: bare, threading.Lock"),
                ("busy", "extra: bare, busy handler only"),
            ]
        sides = []
        for queue, name in variants:
            app, close = bare_app(workdir / f"bare-{queue}.db", queue=queue)
            stack.callback(close)
            sides.append(Side(name, stack.enter_context(waitress_server(app, threads)) + PATH))
        sides.insert(
            1,
            Side(
                "treasury POST /v1/recipients",
                stack.enter_context(waitress_server(create_app(served), threads)) + PATH,
            ),
        )
        yield sides, secret, served


def profile(
    served: Treasury, workdir: Path, headers: dict[str, str], args: argparse.Namespace
) -> None:
    """Where the time goes under the same load: first each side's writer lock timed (how
    long writers wait for it and hold it) and the server's CPU per request; then
    treasury's server threads under cProfile, merged over threads. Fresh servers (the
    floor on a new file; treasury on the same one), so that the measured ones ran
    unwrapped. Treasury's lock is its storage's private ``_writers``, wrapped here."""
    import pstats

    storage: Any = served.storage
    if not hasattr(storage, "_writers"):
        print("\n(the storage has no `_writers` lock to time; skipped)")
    else:
        floor_lock = TimedLock(FifoLock())
        floor_app, close_floor = bare_app(
            workdir / "bare-profile.db", queue="fifo", lock=floor_lock
        )
        treasury_lock = storage._writers = TimedLock(storage._writers)
        rows = []
        try:
            for name, app, lock in (
                ("bare Flask + sqlite3 (floor)", floor_app, floor_lock),
                ("treasury POST /v1/recipients", create_app(served), treasury_lock),
            ):
                with waitress_server(app, args.server_threads) as url:
                    load(url + PATH, headers, args, 1.0)  # warm up
                    lock.waits.clear()
                    lock.holds.clear()
                    run = load(url + PATH, headers, args, args.seconds)
                holds, waits = sorted(lock.holds), lock.waits
                rows.append(
                    [
                        name,
                        f"{run.per_second:,.0f}",
                        f"{run.cpu_per_request:.2f}",
                        f"{sum(waits) / len(waits) * 1e3:.2f}",
                        f"{sum(holds) / len(holds) * 1e3:.2f}",
                        f"{percentile(holds, 0.99) * 1e3:.2f}",
                        f"{sum(holds) / (args.warmup + args.seconds):.0%}",
                    ]
                )
        finally:
            storage._writers = treasury_lock.lock
            close_floor()
        print(
            "\n=== The writer lock under load (one run each; the server's CPU per request;"
            " waits and holds in ms; busy: time held / time of the run) ==="
        )
        header = ["", "requests/s", "CPU ms/req", "wait mean", "hold mean", "hold p99", "busy"]
        print(table(header, rows))

    app = Profiled(create_app(served))
    with waitress_server(app, args.server_threads) as url:
        load(url + PATH, headers, args, 1.0)  # warm up, unprofiled
        app.profiling = True
        run = load(url + PATH, headers, args, args.seconds)
        app.profiling = False
    if run.failures:
        print(f"FAILURES while profiled: {run.failures}: {run.examples}")
    stats = pstats.Stats(app.profilers[0])
    for profiler in app.profilers[1:]:
        stats.add(profiler)
    print_profile(
        f"treasury's {len(app.profilers)} server threads under load ({run.per_second:,.0f}"
        " requests/s while profiled; wall time summed over threads, waits included)",
        stats,
        limit=30,
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="measured seconds per load run (default 2)"
    )
    parser.add_argument("--rounds", type=int, default=10, help="rounds (default 10; median taken)")
    parser.add_argument(
        "--warmup", type=float, default=0.5, help="unmeasured seconds at the start of each run"
    )
    parser.add_argument("--writers", type=int, default=8, help="client threads (default 8)")
    parser.add_argument(
        "--server-threads", type=int, default=8, help="waitress threads (default 8)"
    )
    parser.add_argument(
        "--extras",
        action="store_true",
        help="also the bare endpoint with other writer queues (threading.Lock, busy handler)",
    )
    parser.add_argument(
        "--dir", default=None, help="where the temporary directory goes (default: system temp)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="afterwards, cProfile treasury's server threads"
    )
    args = parser.parse_args(argv)
    if min(args.rounds, args.writers, args.server_threads) < 1 or args.seconds <= 0:
        parser.error("--rounds, --writers, --server-threads and --seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="treasury-bench-", dir=args.dir) as tmp:
        workdir = Path(tmp)
        print(f"{machine()}; databases in {workdir}")
        print(
            f"{args.writers} client threads in a separate process (_load.py), each with its own"
            f" keep-alive connection; waitress threads={args.server_threads};"
            f" {args.rounds} round(s) x {args.seconds:g} s per side (+{args.warmup:g} s"
            " unmeasured per run); every database: WAL, synchronous=FULL, real file"
        )
        print(f"treasury's rate limit is raised to {RATE_LIMIT!r} (the limiter still runs)")
        with live_sides(workdir, args) as (sides, secret, served):
            headers = {"x-api-key": secret}  # sent to every server alike
            run_rounds(sides, headers, args)
            print()
            print(report(sides, args))
            if args.profile:
                profile(served, workdir, headers, args)
    floor, treasury = sides[0], sides[1]
    throughput = ratio(lambda r: r.per_second, treasury, floor)
    p99 = ratio(lambda r: r.percentile(0.99), treasury, floor)
    print()
    invalid = [side for side in sides if side.failures]
    for side in invalid:
        print(f"FAILURES on {side.name}: {dict(side.failures)}; first answers:")
        for example in side.examples:
            print(f"  {example}")
    for extra in sides[2:]:
        print(
            f"{extra.name}: throughput {ratio(lambda r: r.per_second, extra, floor):.2f}"
            f" of the floor's, p99 {ratio(lambda r: r.percentile(0.99), extra, floor):.2f}"
            " of the floor's"
        )
    note = " INVALID: non-201 responses (see above)" if invalid else ""
    ok = "PASS" if throughput >= THROUGHPUT_GOAL else "BELOW GOAL"
    print(f"ratio throughput: {throughput:.2f} (goal >= {THROUGHPUT_GOAL}) {ok}{note}")
    ok = "PASS" if p99 <= P99_GOAL else "ABOVE GOAL"
    print(f"ratio p99: {p99:.2f} (goal <= {P99_GOAL}) {ok}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
