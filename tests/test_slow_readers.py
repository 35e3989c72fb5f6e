"""Clients that never read their answers cannot stop `treasury serve` (DESIGN §3
"Controls, second round"): 8 connections ask for a 150,000-row list (~26 MB) and read
nothing; another client's 15 requests are each answered promptly, and nothing of those
answers is spooled to disk. The figure itself: `benchmarks/slow_readers.py`."""

from __future__ import annotations

import socket
import sqlite3
import tempfile
import time
from pathlib import Path

import httpx

from treasury import Treasury

from .conftest import MASTER_KEY, sqlite_only
from .processes import serving

ROWS = 150_000
SLOW = 8


def _store_with_a_long_list(path: Path) -> str:
    """A SQLite store whose organization saved ROWS recipients; its API key."""
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
                for n in range(1, ROWS + 1)
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
