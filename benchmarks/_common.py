"""Shared helpers of the benchmark scripts: timing loops, the floors' recipients table, a
waitress server, tables."""

from __future__ import annotations

import cProfile
import logging
import os
import platform
import pstats
import secrets
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

WAITRESS_THREADS = 4

# The floors write rows of the shape of treasury's `recipients` table after its migration
# 8 (treasury/_infra/migrations.py, spelled as SQLiteStorage spells it): rows kept in their
# (org_id, number) primary key (WITHOUT ROWID), a foreign key to `organizations`
# (enforced: the storage turns foreign_keys on) and a unique index on (org_id, address).
# A floor takes its numbers from an in-process counter (`FloorNumbers`), so it writes one
# statement per commit.
FLOOR_ORG_ID = "org_bench"
FLOOR_SCHEMA = (
    """CREATE TABLE organizations (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at TEXT NOT NULL)""",
    """CREATE TABLE recipients (
        org_id TEXT NOT NULL REFERENCES organizations(id),
        number BIGINT NOT NULL,
        address TEXT NOT NULL,
        label TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (org_id, number),
        UNIQUE (org_id, address)) WITHOUT ROWID""",
)
FLOOR_INSERT = (
    "INSERT INTO recipients (org_id, number, address, label, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True)
class Sample:
    """How many operations ran in how many seconds."""

    ops: int
    seconds: float

    def __add__(self, other: Sample) -> Sample:
        return Sample(self.ops + other.ops, self.seconds + other.seconds)

    @property
    def per_second(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0

    @property
    def micros(self) -> float:
        """Mean wall-clock time of one operation, in microseconds."""
        return self.seconds / self.ops * 1e6 if self.ops else 0.0


def measure(operation: Callable[[], Any], *, seconds: float, requests: int | None) -> Sample:
    """Run `operation` back to back: `requests` times if given, else for `seconds`."""
    clock = time.perf_counter
    done = 0
    start = clock()
    if requests is not None:
        for _ in range(requests):  # zero is allowed: an empty slice
            operation()
        return Sample(requests, clock() - start)
    deadline = start + seconds
    while True:
        operation()
        done += 1
        now = clock()
        if now >= deadline:
            return Sample(done, now - start)


def warm_up(operation: Callable[[], Any], seconds: float, minimum: int = 20) -> None:
    """Run `operation` for `seconds` (at least `minimum` times) and throw the figures away."""
    measure(operation, seconds=seconds, requests=None)
    measure(operation, seconds=0.0, requests=minimum)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def random_address() -> str:
    """A fresh random EVM address: `0x` + 40 hex characters."""
    return "0x" + secrets.token_hex(20)


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def durable_connection(path: str, **kwargs: Any) -> sqlite3.Connection:
    """A plain sqlite3 connection with treasury's settings (WAL, synchronous=FULL,
    foreign_keys=ON)."""
    conn = sqlite3.connect(path, **kwargs)
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise RuntimeError(f"could not enable WAL on {path}: journal_mode={mode}")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def create_floor_schema(path: str) -> None:
    """The floors' tables (`FLOOR_SCHEMA`) and their one organization, in a new file."""
    conn = durable_connection(path)
    try:
        with conn:
            for statement in FLOOR_SCHEMA:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)",
                (FLOOR_ORG_ID, "Bench", now_text()),
            )
    finally:
        conn.close()


class FloorNumbers:
    """1, 2, 3, ...: a floor's per-organization numbers, safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            self._last += 1
            return self._last


def quiet_waitress() -> None:
    """No 'Serving on' or queue-depth chatter from waitress during a measurement."""
    logging.getLogger("waitress").setLevel(logging.ERROR)


@contextmanager
def waitress_server(app: Any, threads: int = WAITRESS_THREADS) -> Iterator[str]:
    """Serve `app` with waitress on a free loopback port in a thread; yield its base URL."""
    import waitress
    from waitress import wasyncore

    quiet_waitress()
    server = waitress.create_server(app, host="127.0.0.1", port=0, threads=threads)
    thread = threading.Thread(target=server.run, name="benchmark-waitress", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        # As waitress's MultiSocketServer.close: let the worker threads finish (a worker
        # pulls the trigger after its response is sent), then close every socket of the
        # loop (listener, trigger, channels); `run` returns once its map is empty.
        server.task_dispatcher.shutdown()
        wasyncore.close_all(server._map)
        thread.join(timeout=10)


def machine() -> str:
    return (
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPU(s), {platform.system()} {platform.release()}"
    )


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def verdict(ratio: float, goal: float) -> str:
    return "PASS" if ratio >= goal else "BELOW GOAL"


RPC_TIMEOUT = httpx.Timeout(30.0, connect=5.0)  # as RpcChain's own client


class Rpc:
    """Plain JSON-RPC over one keep-alive `httpx.Client`: single requests and batches."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(timeout=RPC_TIMEOUT)
        self._id = 0

    def __call__(self, method: str, *params: Any) -> Any:
        self._id += 1
        body = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": list(params)}
        answer = self.client.post(self.url, json=body).json()
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def batch(self, calls: Sequence[tuple[str, list[Any]]]) -> list[Any]:
        start = self._id + 1
        self._id += len(calls)
        body = [
            {"jsonrpc": "2.0", "id": start + i, "method": m, "params": p}
            for i, (m, p) in enumerate(calls)
        ]
        answers = {a["id"]: a for a in self.client.post(self.url, json=body).json()}
        results = []
        for i, (method, _) in enumerate(calls):
            answer = answers[start + i]
            if "error" in answer:
                raise RuntimeError(f"{method}: {answer['error']}")
            results.append(answer["result"])
        return results

    def close(self) -> None:
        self.client.close()


def print_profile(title: str, profiler: cProfile.Profile | pstats.Stats, limit: int = 22) -> None:
    """The functions with the most cumulative time, as a share of the profiled total."""
    stats = profiler if isinstance(profiler, pstats.Stats) else pstats.Stats(profiler)
    entries = stats.stats  # type: ignore[attr-defined]
    rows = [
        (cumulative, own, calls, where(filename, line, function))
        for (filename, line, function), (_, calls, own, cumulative, _) in entries.items()
    ]
    total = max(row[0] for row in rows)
    rows.sort(reverse=True)
    print(f"\n=== cProfile, {title}: {total:.2f} s profiled ===")
    print(
        table(
            ["cumulative", "own", "calls", "function"],
            [
                [f"{cum / total:.1%}", f"{own / total:.1%}", str(calls), name]
                for cum, own, calls, name in rows[:limit]
            ],
        )
    )


def where(filename: str, line: int, function: str) -> str:
    if filename == "~":  # a built-in
        return function
    for marker in ("site-packages/", f"{Path(__file__).resolve().parent.parent}/"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
    return f"{filename}:{line}:{function}"


# --- a server in a process of its own (memory figures) ----------------------------------


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in bytes."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return {name: int(fields[name].split()[0]) * 1024 for name in ("VmRSS", "VmHWM")}


def serve_store(db: str, port: int, master_key: str) -> None:
    """Serve the treasury on the SQLite file `db` at `port` (8 threads), until killed."""
    from treasury import Treasury
    from treasury.http import create_app
    from treasury.http._server import create_server

    quiet_waitress()
    t = Treasury.open(f"sqlite:///{db}", master_key=master_key, chains={})
    server = create_server(
        create_app(t),
        host="127.0.0.1",
        port=port,
        threads=8,
        connection_limit=1000,
        channel_timeout=30,
        max_body_bytes=t.settings.max_body_bytes,
    )
    server.run()


def start_server(
    script: str, mode: str, db: Path, probe: str, secret: str
) -> tuple[subprocess.Popen[bytes], str]:
    """Run ``script --serve mode --db db --port P`` and wait (60 s at most) until
    ``GET probe`` answers with the key `secret`: the process and its ``/v1`` URL."""
    import httpx

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, script, "--serve", mode, "--db", str(db), "--port", str(port)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(base + probe, headers={"x-api-key": secret}).raise_for_status()
            return process, port
        except httpx.TransportError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError(f"the {mode} server did not start") from None
            time.sleep(0.1)


def track_wallets(t: Any, org_id: str, addresses: list[str]) -> None:
    """Tracked wallets of `org_id` on treasury `t`, stored in one transaction (as
    `wallets.track` stores each; the API's per-request cost is not what is measured)."""
    now = t.now().isoformat()
    with t.storage.transaction() as tx:
        for number, address in enumerate(addresses, start=1):
            tx.execute(
                "INSERT INTO wallets (org_id, number, address, label, type, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, 'tracked', ?, ?)",
                (org_id, number, address, f"Wallet {number}", now, now),
            )
