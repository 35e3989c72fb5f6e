"""Clients that never read their answers cannot stop `treasury serve` (DESIGN §3
"Controls, second round"): 8 connections ask for a 150,000-row list (~26 MB) and read
nothing; another client's 15 requests are each answered promptly, and nothing of those
answers is spooled to disk. The figure itself: `benchmarks/slow_readers.py`."""

from __future__ import annotations

import socket
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import httpx

from treasury import Treasury
from treasury.config import dump_toml

from .conftest import MASTER_KEY, sqlite_only
from .processes import serving

ROWS = 150_000
SLOW = 8


def _store_with_a_long_list(path: Path, rows: int = ROWS) -> str:
    """A SQLite store whose organization saved `rows` recipients; its API key."""
    t = Treasury.open(f"sqlite:///{path}", master_key=MASTER_KEY)
    org = t.admin.create_organization("Acme")
    secret = t.admin.create_api_key(org.id, user_id="reader").secret
    t.close()
    now = "2030-01-01T00:00:00.000000+00:00"
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO recipients (org_id, number, address, label, created_at, updated_at,"
            " pointed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (org.id, n, f"0x{n:040x}", f"Vendor number {n:06d}", now, now, now)
                for n in range(1, rows + 1)
            ),
        )
    return secret


def _never_reading(base: str, secret: str) -> socket.socket:
    host, port = base.removeprefix("http://").removesuffix("/v1").split(":")
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f"GET /v1/recipients HTTP/1.1\r\nHost: x\r\nx-api-key: {secret}\r\n\r\n".encode())
    return s


def _spooled() -> int:
    """Bytes of waitress's temporary files now in the temp directory."""
    folder = Path(tempfile.gettempdir())
    return sum(p.stat().st_size for p in folder.glob("tmp*") if p.is_file())


@sqlite_only  # the rows are written with sqlite3 directly, for speed
def test_eight_clients_that_never_read_do_not_delay_another(tmp_path: Path) -> None:
    secret = _store_with_a_long_list(tmp_path / "t.db")
    env = {"TREASURY_MASTER_KEY": MASTER_KEY, "TREASURY_STORAGE": f"sqlite:///{tmp_path / 't.db'}"}
    with serving(tmp_path, "--no-worker", env=env) as server:
        slow = [_never_reading(server.base, secret) for _ in range(SLOW)]
        try:
            time.sleep(3)  # their answers start and fill every buffer
            waits = []
            with httpx.Client(
                base_url=server.base, headers={"x-api-key": secret}, timeout=30
            ) as other:
                for _ in range(15):
                    started = time.perf_counter()
                    answer = other.get("/policy")
                    waits.append(time.perf_counter() - started)
                    assert answer.status_code == 200, answer.text
            assert max(waits) < 3.0, waits  # the goal is 1 s; a generous bound for CI
        finally:
            for s in slow:
                s.close()


SEND_TIMEOUT = 3  # seconds: `send_timeout_s` of the gunicorn test
GUNICORN_ROWS = 60_000  # ~10 MB: more than every buffer between the server and a client


@sqlite_only  # the rows are written with sqlite3 directly, for speed
def test_under_gunicorn_slow_readers_are_dropped_within_the_send_timeout(
    tmp_path: Path,
) -> None:
    """``treasury serve --processes 2 --threads 2``: four request threads in all, four
    clients that never read a ~10 MB list. Another client sent meanwhile is answered
    within `send_timeout_s` + 5 s, and each slow client is dropped within `send_timeout_s`
    + 5 s of its answer's first bytes: no worker process holds its connection any more
    (what is left of its answer is the kernel's, cut short by a FIN)."""
    import psutil
    import redis

    from .conftest import require_redis

    redis_url = require_redis().rsplit("/", 1)[0] + "/13"
    redis.Redis.from_url(redis_url).flushdb()
    secret = _store_with_a_long_list(tmp_path / "t.db", GUNICORN_ROWS)
    config = tmp_path / "treasury.toml"
    config.write_text(
        dump_toml(
            {
                "storage": f"sqlite:///{tmp_path / 't.db'}",
                "master_key": MASTER_KEY,
                "chains": {},  # processes cannot share the in-process devnet
                "rate_limit_storage": redis_url,  # nor rate limits in memory
                "send_timeout_s": SEND_TIMEOUT,
            }
        )
    )
    env = {"TREASURY_CONFIG": str(config)}
    args = ("--processes", "2", "--threads", "2", "--no-worker")
    with serving(tmp_path, *args, env=env) as server:
        workers = psutil.Process(server.process.pid).children()  # gunicorn's two
        assert len(workers) == 2

        def held(s: socket.socket) -> bool:
            port = s.getsockname()[1]
            return any(
                c.raddr and c.raddr.port == port for w in workers for c in w.net_connections()
            )

        slow = [_never_reading(server.base, secret) for _ in range(4)]
        begun: dict[int, float] = {}  # slow client -> when its answer's first bytes came

        def watch() -> None:
            deadline = time.monotonic() + 60
            while len(begun) < len(slow) and time.monotonic() < deadline:
                for i, s in enumerate(slow):
                    if i not in begun and _has_bytes(s):
                        begun[i] = time.monotonic()
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            time.sleep(1)  # they take every request thread
            started = time.monotonic()
            with httpx.Client(
                base_url=server.base, headers={"x-api-key": secret}, timeout=60
            ) as other:
                answer = other.get("/policy")
            waited = time.monotonic() - started
            assert answer.status_code == 200, answer.text
            assert waited < SEND_TIMEOUT + 5, waited

            watcher.join()
            assert len(begun) == len(slow), begun  # every slow client's answer had begun
            for i, s in enumerate(slow):
                time.sleep(max(0.0, begun[i] + SEND_TIMEOUT + 5 - time.monotonic()))
                assert not held(s), f"slow client {i} still held {SEND_TIMEOUT + 5} s on"
        finally:
            watcher.join()
            for s in slow:
                s.close()
        assert server.alive()


def _has_bytes(s: socket.socket) -> bool:
    try:
        return bool(s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False
