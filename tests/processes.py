"""`treasury` commands in subprocesses, as a user runs them: start, wait, stop, read logs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment without any TREASURY_* setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    return {**env, **(extra or {})}


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base: str  # http://127.0.0.1:PORT/v1
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None


@contextmanager
def serving(
    cwd: Path, *args: str, env: Mapping[str, str] | None = None, ready_within: float = 60
) -> Iterator[Server]:
    """`treasury serve --port P *args` in `cwd`; yields once it answers, stops it after."""
    port = free_port()
    log = cwd / f"serve-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "treasury.cli", "serve", "--port", str(port), *args],
            cwd=cwd,
            env=clean_env(env),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    server = Server(process, f"http://127.0.0.1:{port}/v1", log)
    try:
        deadline = time.monotonic() + ready_within
        while True:
            assert server.alive(), server.output()
            try:
                httpx.get(f"{server.base}/yield/artifacts", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, f"no answer in {ready_within} s"
                time.sleep(0.1)
        yield server
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
