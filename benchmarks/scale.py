"""Scale-out on PostgreSQL: what one API process spends per request, against a floor.

    .venv/bin/python benchmarks/scale.py [--rounds R] [--seconds S] [--clients C]
                                         [--only recipients|onramps]

Two figures, each against a floor measured in the same run, on the same PostgreSQL server
(its own durability settings, printed: both sides of a ratio commit alike), behind the
same server (gunicorn, one gthread worker, ``--threads`` threads; `_gunicorn.py`), driven
by the same client (`_load.py` in a separate process: ``--clients`` threads, one
keep-alive ``http.client`` connection each, one request after another):

* recipients: ``POST /v1/recipients`` (each client thread an organization and API key
  of its own, as for the on-ramps; a fresh Idempotency-Key and random address per
  request) of treasury ÷ the same requests to a
  bare Flask app, whose endpoint parses the JSON, does one ``INSERT … RETURNING number``
  of a row of the shape of treasury's ``recipients`` table (`_gunicorn.PG_FLOOR_SCHEMA`;
  its number from an in-process counter) on a ``psycopg_pool`` connection in autocommit
  (committed, one round trip) and returns the row as JSON. Goals: requests/s ratio
  >= 0.5, and the API process's CPU per request <= 2x the floor's; the same goals for
  treasury with every thread on one organization's key (its numbers come from one
  counter, its audit events go to one chain). No worker runs during the load: the audit
  events wait outside their chains, and after each treasury run the script seals them
  as a worker's job does, prints that job's CPU per event, and verifies every chain.
* on-ramps: ``POST /v1/transfers`` (usd/ach_push -> usdc/ethereum on the ``sandbox://``
  fiat provider, a fresh Idempotency-Key and destination address per request; each
  client thread has an organization and API key of its own and registers its bank
  account first) of treasury ÷ the bare app's on-ramp floor: the same durable writes
  (the claim: the transfer and its key in flight; the record: the transfer's stage and
  provider ids, its event, the key done), each transaction one pipelined round trip, on
  a database treasury migrated. No goal: printed to follow. The on-ramp's chain (31337)
  is an anvil node the script starts and stops; creating an on-ramp never calls it.

For each side: the API process's CPU per request (the figure that scales: N API processes
on N cores of their own serve N times what one CPU-second of one process serves, as
long as PostgreSQL and Redis have cores of their own to keep up), PostgreSQL's and
Redis' CPU per request, and the PostgreSQL round trips and statements of one request,
counted by the connections' cursors (`treasury.testing.round_trips`) on an in-process
copy of each side. The capacity of N processes on N free cores is printed as a
projection from those figures, not a measurement: this machine's 2 cores are shared by
the API process, PostgreSQL, Redis and the client, so no run here can show it.

Every load run gets a fresh PostgreSQL database (``CREATE DATABASE``, migrated by
``Treasury.open``, ``DROP DATABASE … WITH (FORCE)`` afterwards) and fresh server
processes, so that every run starts from the same state. treasury's settings: that
database, ``rate_limit = "100000000/1 second"`` per key (the limiter still runs on every
request) with its counters in a Redis database of its own (``--redis``, flushed before
every run and at the end), no background jobs in the API processes (``--no-worker``).
Each side first takes one short unmeasured run (the first runs after the script starts
are slower); then, in each of ``--rounds`` rounds, the sides of a figure take one load
run each in rotating order; a ratio is the median of the per-round ratios. Each run has
``--warmup`` unmeasured seconds, then ``--seconds`` measured ones.

Alongside each run, the CPU time spent by each part (the API processes, PostgreSQL's
processes, Redis, the client process, the whole machine), the PostgreSQL transactions
committed per request, how the connections were spread over the workers, and afterwards
the rows in the database (every 201 must be one row). This machine's cores are shared by
all of them: the output says what bounds the ratio. The process exits 0 whatever the
figures: this is a measurement, not a test; failures are printed, never dropped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psutil
import psycopg
import redis
from _common import FLOOR_ORG_ID, free_port, machine, median, now_text, table, verdict
from _gunicorn import PG_FLOOR_SCHEMA

from treasury import Treasury
from treasury.config import Settings, dump_toml, write_chain
from treasury.testing.round_trips import Census
from treasury.testing.statements import BANK_ACCOUNT

POSTGRES = os.environ.get(
    "TREASURY_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS = "redis://127.0.0.1:6379/13"  # a database of its own, flushed before every run
CHAIN_ID = 31337
MASTER_KEY = "0" * 64
RATE_LIMIT = "100000000/1 second"  # per key: the limiter runs, its ceiling is out of reach
RECIPIENTS_GOAL = 0.5
CPU_GOAL = 2.0  # the API process's CPU per recipient at most this times the floor's
HERE = Path(__file__).resolve().parent
LOAD, SERVER = HERE / "_load.py", HERE / "_gunicorn.py"


# --- measuring --------------------------------------------------------------------------


@dataclass
class Cpu:
    """CPU seconds of each part during one load run (warm-up included)."""

    api: float = 0.0  # the gunicorn arbiter and its workers
    postgres: float = 0.0  # every process of the PostgreSQL server
    redis: float = 0.0
    client: float = 0.0  # the load generator
    machine: float = 0.0  # all cores, busy (not idle, not waiting for I/O)
    iowait: float = 0.0  # all cores, idle while some I/O (a commit's flush) was pending
    steal: float = 0.0  # all cores, taken by the virtual machine's host for others
    wall: float = 0.0

    @property
    def parts(self) -> float:
        """What the parts of the run spent: API, PostgreSQL, Redis and the client."""
        return self.api + self.postgres + self.redis + self.client


@dataclass
class Run:
    """One load run against one side, as `_load.py` reported it, and what we saw."""

    requests: int
    seconds: float
    latencies: list[float]  # milliseconds, sorted
    sent: int
    failures: dict[str, int]
    examples: list[str]
    cpu: Cpu
    commits: int  # PostgreSQL transactions committed in the side's database during the run
    rows: int  # the side's rows afterwards (transfers or recipients)
    connections: list[int]  # established client connections per worker, mid-run

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    def per_request(self, seconds: float) -> float:
        """Milliseconds per request sent (warm-up included)."""
        return seconds / self.sent * 1e3 if self.sent else math.nan

    def percentile(self, q: float) -> float:
        return percentile(self.latencies, q)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least `q` of the values at or below it."""
    if not sorted_values:
        return math.nan
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def cpu_seconds(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def by_name(name: str) -> dict[int, float]:
    """CPU seconds so far of every process called `name`, by pid."""
    found = {}
    for process in psutil.process_iter(["name"]):
        if process.info["name"] == name:
            found[process.pid] = cpu_seconds(process)
    return found


def machine_seconds() -> tuple[float, float, float]:
    """CPU seconds the whole machine spent so far (all cores): busy, in iowait, and
    stolen by a virtual machine's host (Linux counts guest time in user time)."""
    times = psutil.cpu_times()
    iowait, steal = float(getattr(times, "iowait", 0.0)), float(getattr(times, "steal", 0.0))
    others = times.idle + getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    return float(sum(times) - others) - iowait - steal, iowait, steal


@dataclass
class Snapshot:
    api: float
    postgres: dict[int, float]
    redis: dict[int, float]
    machine: tuple[float, float, float]
    at: float

    @classmethod
    def take(cls, server: Server) -> Snapshot:
        return cls(
            api=server.cpu(),
            postgres=by_name("postgres"),
            redis=by_name("redis-server"),
            machine=machine_seconds(),
            at=time.perf_counter(),
        )

    def since(self, start: Snapshot, client: float) -> Cpu:
        def spent(now: dict[int, float], before: dict[int, float]) -> float:
            # a process started during the run (a pool's new connection) counts from zero
            return sum(value - before.get(pid, 0.0) for pid, value in now.items())

        return Cpu(
            api=self.api - start.api,
            postgres=spent(self.postgres, start.postgres),
            redis=spent(self.redis, start.redis),
            client=client,
            machine=self.machine[0] - start.machine[0],
            iowait=self.machine[1] - start.machine[1],
            steal=self.machine[2] - start.machine[2],
            wall=self.at - start.at,
        )


# --- databases, servers -----------------------------------------------------------------


def database_url(name: str) -> str:
    parts = urlsplit(POSTGRES)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty PostgreSQL database on the server; dropped afterwards."""
    name = "bench_scale_" + secrets.token_hex(6)
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def commits(name: str) -> int:
    """Transactions committed so far in database `name` (the server's statistics)."""
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (name,)
        ).fetchone()
    return int(row[0]) if row else 0


def count_rows(name: str, table_name: str) -> int:
    with psycopg.connect(database_url(name), autocommit=True) as conn:
        row = conn.execute(f"SELECT COUNT(*) FROM {table_name}").fetchone()
    return int(row[0]) if row else 0


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def workers(self) -> list[psutil.Process]:
        try:
            return list(psutil.Process(self.process.pid).children())
        except psutil.Error:
            return []

    def cpu(self) -> float:
        return cpu_seconds(psutil.Process(self.process.pid)) + sum(
            cpu_seconds(worker) for worker in self.workers()
        )

    def connections(self) -> list[int]:
        """Established connections on the server's port, per worker (most first)."""
        counts = []
        for worker in self.workers():
            try:
                found = worker.net_connections("tcp")
            except psutil.Error:
                found = []
            counts.append(
                sum(
                    1
                    for c in found
                    if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == self.port
                )
            )
        return sorted(counts, reverse=True)


@contextmanager
def gunicorn(app: str, target: str, workers: int, threads: int, logs: Path) -> Iterator[Server]:
    """`_gunicorn.py app target` on a free port; yields once every worker answers."""
    port = free_port()
    log = logs / f"{app}-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                str(SERVER),
                app,
                target,
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--threads",
                str(threads),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=logs,
        )
    server = Server(process, port, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{app} server exited: {log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{app} server: no answer in 60 s")
            try:
                # any answer will do (the bare app's is a 404); every worker booted
                httpx.get(f"{server.base}/v1/yield/artifacts", timeout=5)
                if len(server.workers()) == workers:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        time.sleep(0.5)  # the last worker to boot opens its pool
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def treasury_config(
    workdir: Path, name: str, chain: dict[str, Any] | None, args: argparse.Namespace
) -> Path:
    """The settings file of every API process of a run (what `serve` would read)."""
    config = workdir / f"{name}.toml"
    config.write_text(
        dump_toml(
            {
                "storage": database_url(name),
                "master_key": MASTER_KEY,
                "rate_limit": RATE_LIMIT,
                "rate_limit_storage": args.redis,
                "chains": {},
            }
        )
    )
    if chain is not None:
        write_chain(config, CHAIN_ID, chain)
    return config


def api_keys(config: Path, organizations: int) -> list[str]:
    """Migrate the database (`Treasury.open`), then `organizations` tenants: their keys."""
    t = Treasury.open(settings=Settings.load(env={}, toml_file=config))
    try:
        keys = []
        for n in range(organizations):
            org = t.admin.create_organization(f"Bench {n + 1}")
            keys.append(t.admin.create_api_key(org.id, user_id="bench").secret)
        return keys
    finally:
        t.close()


def sealed_afterwards(config: Path) -> str:
    """After a treasury run: its audit events, pending (no worker ran), sealed into their
    chains here as a worker's job would, timed, then every chain verified."""
    t = Treasury.open(settings=Settings.load(env={}, toml_file=config))
    try:
        started, sealed = time.process_time(), 0
        while done := t.run_once(only=["seal_audit_events"])["audit_events_sealed"]:
            sealed += done
        spent = time.process_time() - started
        checked, broken = t.verify_audit_log()
    finally:
        t.close()
    each = spent / sealed * 1e3 if sealed else 0.0
    verdict_ = "every chain verifies" if broken is None else f"BROKEN: {broken}"
    return (
        f"    then: {sealed:,} audit events sealed by a worker's job,"
        f" {each:.3f} ms of that process's CPU each; {checked:,} events checked, {verdict_}"
    )


def floor_schema(name: str) -> None:
    with psycopg.connect(database_url(name), autocommit=True) as conn:
        for statement in PG_FLOOR_SCHEMA:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO organizations (id, name, created_at) VALUES (%s, %s, %s)",
            (FLOOR_ORG_ID, "Bench", now_text()),
        )


def load(
    url: str,
    server: Server,
    args: argparse.Namespace,
    extra: list[str],
) -> tuple[dict[str, Any], Cpu, list[int]]:
    """One run of `_load.py` against `url` in its own process; the CPU each part spent,
    and the connections per worker sampled in the middle of the measured window."""
    command = [
        sys.executable,
        str(LOAD),
        url,
        "--threads",
        str(args.clients),
        "--seconds",
        str(args.seconds),
        "--warmup",
        str(args.warmup),
        *extra,
    ]
    before = Snapshot.take(server)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    spread: list[int] = []
    sampler = threading.Timer(
        0.5 + args.warmup + args.seconds / 2, lambda: spread.extend(server.connections())
    )
    sampler.start()
    output: list[bytes] = []
    errors: list[bytes] = []
    readers = [
        threading.Thread(target=lambda: output.append(process.stdout.read())),  # type: ignore[union-attr]
        threading.Thread(target=lambda: errors.append(process.stderr.read())),  # type: ignore[union-attr]
    ]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(process.pid, 0)  # the client's own CPU time, from the kernel
    process.returncode = os.waitstatus_to_exitcode(status)
    after = Snapshot.take(server)
    for reader in readers:
        reader.join()
    sampler.cancel()
    sampler.join()
    if process.returncode != 0:
        raise RuntimeError(f"_load.py exited {process.returncode}: {b''.join(errors).decode()}")
    result = json.loads(b"".join(output))
    cpu = after.since(before, usage.ru_utime + usage.ru_stime)
    return result, cpu, spread


# --- the sides --------------------------------------------------------------------------


@dataclass
class Side:
    name: str
    run_once: Callable[[Path, argparse.Namespace], Run]
    runs: list[Run] = field(default_factory=list)

    @property
    def failures(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for run in self.runs:
            for status, n in run.failures.items():
                total[status] = total.get(status, 0) + n
        return total

    @property
    def examples(self) -> list[str]:
        return [e for run in self.runs for e in run.examples][:5]


def as_run(result: dict[str, Any], cpu: Cpu, spread: list[int], done: int, rows: int) -> Run:
    failures = dict(result["failures"])
    examples = list(result["examples"])
    for error in result.get("setup_errors", []):
        failures["setup"] = failures.get("setup", 0) + 1
        examples.append(f"setup {error}")
    return Run(
        requests=result["requests"],
        seconds=result["seconds"],
        latencies=sorted(us / 1e3 for us in result["latencies_us"]),
        sent=result["sent"],
        failures=failures,
        examples=examples,
        cpu=cpu,
        commits=done,
        rows=rows,
        connections=spread,
    )


def onramps(app: str, chain: dict[str, Any]) -> Side:
    """On-ramps (`POST /v1/transfers`) to treasury or to the bare floor, one worker."""

    def run_once(workdir: Path, args: argparse.Namespace) -> Run:
        redis.Redis.from_url(args.redis).flushdb()
        with fresh_database() as name:
            config = treasury_config(workdir, name, chain, args)
            if app == "treasury":
                keys, target = api_keys(config, args.clients), str(config)
            else:
                onramp_floor(config)
                keys, target = ["floor"], database_url(name)
            (workdir / "keys").write_text("\n".join(keys))
            (workdir / "bank.json").write_text(json.dumps(BANK_ACCOUNT))
            extra = ["--keys", str(workdir / "keys"), "--onramp", str(workdir / "bank.json")]
            with gunicorn(app, target, 1, args.threads, workdir) as server:
                before = commits(name)
                result, cpu, spread = load(f"{server.base}/v1/transfers", server, args, extra)
            time.sleep(0.2)  # the backends' statistics reach the server as they exit
            done = commits(name) - before
            rows = count_rows(name, "transfers")
        return as_run(result, cpu, spread, done, rows)

    name = "treasury POST /v1/transfers (on-ramp)" if app == "treasury" else "bare on-ramp (floor)"
    return Side(name, run_once)


def onramp_floor(config: Path) -> None:
    """A database treasury migrated, with the floor's organization."""
    api_keys(config, 0)
    with psycopg.connect(database_url(Path(config).stem), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO organizations (id, name, created_at) VALUES (%s, %s, %s)",
            (FLOOR_ORG_ID, "Bench", now_text()),
        )


def recipients(app: str, *, shared: bool = False) -> Side:
    """`POST /v1/recipients` to treasury or to the bare floor, one gunicorn worker. Each
    client thread sends treasury its own organization's key (as the on-ramps do), or,
    `shared`, every thread the key of one organization."""

    def run_once(workdir: Path, args: argparse.Namespace) -> Run:
        redis.Redis.from_url(args.redis).flushdb()
        with fresh_database() as name:
            if app == "treasury":
                config = treasury_config(workdir, name, None, args)
                keys = api_keys(config, 1 if shared else args.clients)
                (workdir / "keys").write_text("\n".join(keys))
                target, extra = str(config), ["--keys", str(workdir / "keys")]
            else:
                floor_schema(name)
                target, extra = database_url(name), []
            with gunicorn(app, target, 1, args.threads, workdir) as server:
                before = commits(name)
                result, cpu, spread = load(f"{server.base}/v1/recipients", server, args, extra)
            time.sleep(0.2)
            done = commits(name) - before
            rows = count_rows(name, "recipients")
            if app == "treasury":
                print(sealed_afterwards(config), flush=True)
        return as_run(result, cpu, spread, done, rows)

    name = "bare Flask + psycopg (floor)"
    if app == "treasury":
        name = "treasury POST /v1/recipients" + (", one organization" if shared else "")
    return Side(name, run_once)


# --- running, reporting -----------------------------------------------------------------


def run_rounds(sides: list[Side], workdir: Path, args: argparse.Namespace) -> None:
    """One short unmeasured run per side (the first runs of a process are slower), then
    `--rounds` rounds of one run per side in rotating order."""
    for side in sides:
        run = side.run_once(workdir, argparse.Namespace(**{**vars(args), "seconds": 1.0}))
        print(f"  warm-up: {side.name}: {run.per_second:,.0f} requests/s", flush=True)
    for round_ in range(args.rounds):
        shift = round_ % len(sides)
        for side in sides[shift:] + sides[:shift]:
            run = side.run_once(workdir, args)
            side.runs.append(run)
            print(
                f"  round {round_ + 1}: {side.name}: {run.per_second:,.0f} requests/s"
                + (f", failures {run.failures}" if run.failures else ""),
                flush=True,
            )


def ratio(contender: Side, baseline: Side) -> float:
    """The median over rounds of contender/baseline requests/s in the same round."""
    return median(
        [c.per_second / b.per_second for c, b in zip(contender.runs, baseline.runs, strict=True)]
    )


def report(sides: list[Side], rounds: int) -> str:
    header = ["", "figure", *(f"r{i + 1}" for i in range(rounds)), "median"]
    rows: list[list[str]] = []

    def row(side: Side, label: str, value: Callable[[Run], float], fmt: str) -> None:
        values = [value(run) for run in side.runs]
        rows.append(["", label, *(format(v, fmt) for v in values), format(median(values), fmt)])

    for side in sides:
        rows.append([side.name, "", *([""] * (rounds + 1))])
        row(side, "requests/s", lambda r: r.per_second, ",.0f")
        row(side, "p50 ms", lambda r: r.percentile(0.5), ".1f")
        row(side, "p99 ms", lambda r: r.percentile(0.99), ".1f")
        row(side, "cores: API processes", lambda r: r.cpu.api / r.cpu.wall, ".2f")
        row(side, "cores: PostgreSQL", lambda r: r.cpu.postgres / r.cpu.wall, ".2f")
        row(side, "cores: Redis", lambda r: r.cpu.redis / r.cpu.wall, ".2f")
        row(side, "cores: client", lambda r: r.cpu.client / r.cpu.wall, ".2f")
        row(side, "cores: machine busy", lambda r: r.cpu.machine / r.cpu.wall, ".2f")
        row(side, "cores: machine iowait", lambda r: r.cpu.iowait / r.cpu.wall, ".2f")
        row(side, "cores: stolen (VM host)", lambda r: r.cpu.steal / r.cpu.wall, ".2f")
        row(side, "CPU ms/req: API", lambda r: r.per_request(r.cpu.api), ".2f")
        row(side, "CPU ms/req: PostgreSQL", lambda r: r.per_request(r.cpu.postgres), ".2f")
        row(side, "CPU ms/req: Redis", lambda r: r.per_request(r.cpu.redis), ".2f")
        row(side, "CPU ms/req: client", lambda r: r.per_request(r.cpu.client), ".2f")
        row(side, "CPU ms/req: all four", lambda r: r.per_request(r.cpu.parts), ".2f")
        row(side, "PG commits/req", lambda r: r.commits / r.sent if r.sent else math.nan, ".2f")
        rows.append(
            ["", "connections/worker", *("/".join(map(str, r.connections)) for r in side.runs), ""]
        )
        rows.append(["", "non-201", *(str(sum(r.failures.values())) for r in side.runs), ""])
        rows.append(
            [
                "",
                "rows == 201s",
                *(str(r.rows == r.sent - sum(r.failures.values())) for r in side.runs),
                "",
            ]
        )
    return table(header, rows)


def postgres_settings() -> str:
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        values = [
            f"{name}={conn.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
            for name in ("fsync", "synchronous_commit", "wal_sync_method", "max_connections")
        ]
    return f"PostgreSQL {version[0] if version else '?'} ({', '.join(values)})"


def print_failures(sides: list[Side]) -> bool:
    invalid = False
    for side in sides:
        if side.failures or any(r.rows != r.sent - sum(r.failures.values()) for r in side.runs):
            invalid = True
        if side.failures:
            print(f"FAILURES on {side.name}: {side.failures}; first answers:")
            for example in side.examples:
                print(f"  {example}")
    return invalid


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5; median taken)")
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="measured seconds per load run (default 5)"
    )
    parser.add_argument(
        "--warmup", type=float, default=1.0, help="unmeasured seconds at the start of each run"
    )
    parser.add_argument(
        "--clients", type=int, default=16, help="client threads/connections (default 16)"
    )
    parser.add_argument(
        "--threads", type=int, default=8, help="gunicorn threads per worker (default 8)"
    )
    parser.add_argument("--only", choices=["recipients", "onramps"], default=None)
    parser.add_argument("--redis", default=REDIS, help=f"rate-limit counters (default {REDIS})")
    parser.add_argument(
        "--dir", default=None, help="where the temporary directory goes (default: system temp)"
    )
    args = parser.parse_args(argv)
    if min(args.rounds, args.clients, args.threads) < 1 or args.seconds <= 0:
        parser.error("--rounds, --clients, --threads and --seconds must be positive")
    return args


def round_trips(
    app: str, kind: str, chain: dict[str, Any] | None, args: argparse.Namespace
) -> Census:
    """The statements and round trips of one request of `kind` (``recipients`` or
    ``onramps``) to `app`, after one unmeasured request, on an in-process copy of the
    side (the same code and settings, a fresh database), counted by its connections."""
    from _gunicorn import bare_app

    from treasury.backends.storage.postgresql import PostgresStorage
    from treasury.http import create_app

    census = Census()
    with fresh_database() as name, tempfile.TemporaryDirectory() as where:
        config = treasury_config(Path(where), name, chain, args)
        headers: dict[str, str] = {}
        treasury = None
        if app == "treasury":
            headers["x-api-key"] = api_keys(config, 1)[0]
            storage = PostgresStorage(
                database_url(name), connection_class=census.connection_class()
            )
            settings = Settings.load(env={}, toml_file=config)
            treasury = Treasury.open(storage, settings=settings)
            client = create_app(treasury).test_client()
        else:
            onramp_floor(config) if kind == "onramps" else floor_schema(name)
            wsgi = bare_app(
                database_url(name), pool_max=2, connection_class=census.connection_class()
            )
            client = wsgi.test_client()  # type: ignore[attr-defined]
        try:
            path, body = (
                "/v1/recipients",
                lambda: {"address": "0x" + secrets.token_hex(20), "label": "x"},
            )
            if kind == "onramps":
                answer = client.post(
                    "/v1/bank-accounts",
                    json=BANK_ACCOUNT,
                    headers={**headers, "Idempotency-Key": "b"},
                )
                bank = answer.get_json()["providerExternalAccountId"]
                path = "/v1/transfers"
                body = lambda: {  # noqa: E731
                    "amount": "10",
                    "source": {
                        "currency": "usd",
                        "payment_rail": "ach_push",
                        "external_account_id": bank,
                    },
                    "destination": {
                        "currency": "usdc",
                        "payment_rail": "ethereum",
                        "to_address": "0x" + secrets.token_hex(20),
                    },
                }
            for attempt in ("warm-up", "counted"):
                census.clear()
                answer = client.post(
                    path, json=body(), headers={**headers, "Idempotency-Key": attempt}
                )
                if answer.status_code != 201:
                    raise RuntimeError(
                        f"{app} {path}: {answer.status_code} {answer.get_data()[:300]!r}"
                    )
        finally:
            if treasury is not None:
                treasury.close()
    return census


def figure(
    kind: str, chain: dict[str, Any] | None, workdir: Path, args: argparse.Namespace
) -> list[str]:
    """One figure: the floor and treasury, rounds of load, the table, the verdicts."""
    make = (
        (lambda app: recipients(app))
        if kind == "recipients"
        else (lambda app: onramps(app, chain or {}))
    )
    sides = [make("bare"), make("treasury")]
    if kind == "recipients":
        sides.append(recipients("treasury", shared=True))
    what = "POST /v1/recipients" if kind == "recipients" else "on-ramps (POST /v1/transfers)"
    print(f"\n=== {what}: treasury vs its floor, one gunicorn worker each ===")
    run_rounds(sides, workdir, args)
    print()
    print(report(sides, args.rounds))
    invalid = print_failures(sides)
    note = " INVALID: failures or missing rows (see above)" if invalid else ""
    measured = ratio(sides[1], sides[0])

    def typical(side: Side, value: Callable[[Run], float]) -> float:
        return median([value(run) for run in side.runs])

    api = [typical(side, lambda r: r.per_request(r.cpu.api)) for side in sides]
    postgres = [typical(side, lambda r: r.per_request(r.cpu.postgres)) for side in sides]
    census = [round_trips(app, kind, chain, args) for app in ("bare", "treasury")]
    for side, counted in zip(sides, census, strict=False):  # one census per app
        print(
            f"{side.name}: {counted.round_trips} PostgreSQL round trips per request"
            f" ({len(counted.statements)} statements)"
        )
    cpu_ratio = api[1] / api[0]
    per_process = 1e3 / api[1]
    print(
        f"Projection, not a measurement: one API process does at most {per_process:,.0f}"
        f" {kind}/s on a core of its own ({api[1]:.2f} ms of CPU each); N processes on N"
        f" free cores, N x that ({', '.join(f'{n}: {n * per_process:,.0f}/s' for n in (2, 4, 8))}),"
        f" if PostgreSQL (at {postgres[1]:.2f} ms of CPU a request: "
        f"{postgres[1] * per_process / 1e3:.2f} of a core per busy API process) and Redis"
        " have cores of their own to keep up."
    )
    lines = [
        f"{kind}: requests/s ratio (treasury / floor) {measured:.2f}"
        + (
            f" (goal >= {RECIPIENTS_GOAL}) {verdict(measured, RECIPIENTS_GOAL)}"
            if kind == "recipients"
            else ""
        )
        + note,
        f"{kind}: API CPU per request {api[1]:.2f} ms vs floor {api[0]:.2f} ms: {cpu_ratio:.2f}x"
        + (
            f" (goal <= {CPU_GOAL}) {'met' if cpu_ratio <= CPU_GOAL else 'NOT met'}"
            if kind == "recipients"
            else ""
        ),
        f"{kind}: PostgreSQL round trips per request {census[1].round_trips} vs floor {census[0].round_trips}",
    ]
    if len(sides) > 2:
        one, one_cpu = ratio(sides[2], sides[0]), api[2] / api[0]
        lines += [
            f"{kind}: one organization's requests/s ratio (treasury / floor) {one:.2f}"
            f" (goal >= {RECIPIENTS_GOAL}) {verdict(one, RECIPIENTS_GOAL)}",
            f"{kind}: one organization's API CPU per request {api[2]:.2f} ms vs floor"
            f" {api[0]:.2f} ms: {one_cpu:.2f}x (goal <= {CPU_GOAL})"
            f" {'met' if one_cpu <= CPU_GOAL else 'NOT met'}",
        ]
    return lines


def anvil_chain(stack: ExitStack) -> dict[str, Any]:
    """An anvil node with the contracts (stopped with `stack`): the on-ramps' chain."""
    from treasury.anvil import deploy_contracts, start_anvil

    node = stack.enter_context(start_anvil())
    return deploy_contracts(node.url)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"{machine()}; {postgres_settings()}; load average {os.getloadavg()[0]:.2f}")
    print(
        f"load: _load.py in a separate process, {args.clients} threads with a keep-alive"
        f" connection each; servers: gunicorn gthread, {args.threads} threads per worker;"
        f" {args.rounds} round(s) x {args.seconds:g} s per side (+{args.warmup:g} s"
        " unmeasured per run); a fresh database and fresh servers every run"
    )
    print(f"treasury: rate_limit {RATE_LIMIT!r} in {args.redis} (the limiter runs), no jobs")
    results: list[str] = []
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=args.dir)))
        stack.callback(lambda: redis.Redis.from_url(args.redis).flushdb())
        for kind in ("recipients", "onramps"):
            if args.only not in (None, kind):
                continue
            try:
                chain = None if kind == "recipients" else anvil_chain(stack)
                results += figure(kind, chain, workdir, args)
            except Exception:  # a measurement exits 0: say what broke, go on
                traceback.print_exc()
                results.append(f"{kind}: NOT MEASURED (error above)")
    print()
    for line in results:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
