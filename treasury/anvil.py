"""A shared local chain: anvil on loopback with our contracts, for several processes.

::

    with start_anvil() as node:
        config = deploy_contracts(node.url)   # {"url": ..., "addresses": {...}}
        t = Treasury.open(chains={31337: config})
        fund(node.url, config, "0x…", "USDC", "250.5")

The anvil binary comes from the npm package ``@foundry-rs/anvil`` (``npm ci``); set
``TREASURY_ANVIL`` to use another one. Transactions are signed with anvil's first dev
account (`DEPLOYER_KEY`), which owns the contracts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import httpx

__all__ = [
    "CHAIN_ID",
    "DEPLOYER_KEY",
    "AnvilNode",
    "deploy_contracts",
    "find_anvil",
    "fund",
    "start_anvil",
]

#: Anvil's first dev account (publicly known; never use it on a real chain).
DEPLOYER_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
CHAIN_ID = 31337
_STARTUP_TIMEOUT = 20.0


class AnvilNode:
    """A running anvil process; `stop` (or leaving the ``with`` block) ends it."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log: IO[bytes]) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._log = log

    def stop(self) -> None:
        """Terminate anvil (and a node.js wrapper's child with it); idempotent."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
                self.process.wait()
        self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def find_anvil() -> str | None:
    """``TREASURY_ANVIL``, else ``node_modules`` above the working directory or this
    package (the native binary when the npm platform package is there), else ``PATH``."""
    if os.environ.get("TREASURY_ANVIL"):
        return os.environ["TREASURY_ANVIL"]
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    native = f"@foundry-rs/anvil-{platform.system().lower()}-{arch}/bin/anvil"
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for directory in (start, *start.parents):
            modules = directory / "node_modules"
            for candidate in (modules / native, modules / ".bin" / "anvil"):
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return str(candidate)
    return shutil.which("anvil")


def start_anvil(
    port: int | None = None, block_time: float | None = None, chain_id: int = CHAIN_ID
) -> AnvilNode:
    """Start anvil on 127.0.0.1 (a free port unless given) with `chain_id` (31337) and wait
    until it answers JSON-RPC. `block_time` seconds per block; default: mine each
    transaction at once. On Linux anvil ends with the thread that started it, even when
    the process is killed (call it from a thread that outlives its use)."""
    binary = find_anvil()
    if binary is None:
        raise FileNotFoundError("anvil not found: run `npm ci` or set TREASURY_ANVIL")
    if port is None:
        port = _free_port()
    elif not _is_free(port):  # else the readiness check would reach the other server
        raise OSError(f"port {port} on 127.0.0.1 is in use")
    command = [binary, "--host", "127.0.0.1", "--port", str(port), "--chain-id", str(chain_id)]
    command.append("--quiet")  # no log line per request; startup errors are still printed
    if block_time is not None:
        command += ["--block-time", str(block_time)]
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by AnvilNode.stop)
    process = subprocess.Popen(  # noqa: S603 (a fixed argument list)
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stop() also ends a wrapper's child
        preexec_fn=_die_with_parent if sys.platform == "linux" else None,
    )
    node = AnvilNode(process, port, log)
    try:
        _wait_until_ready(node)
    except BaseException:
        node.stop()
        raise
    return node


def deploy_contracts(url: str, c0_decimals: int | None = None) -> dict[str, Any]:
    """Deploy our contracts on the node at `url` with `DEPLOYER_KEY`, c0 with `c0_decimals`
    (default 18); return the chain configuration ``{"url", "addresses", "minter_key"}`` (a
    `ChainConfig.parse` spec): `DEPLOYER_KEY` owns the contracts, so the chain can mint
    (the faucet). The library reads c0's decimals from c0 itself."""
    from .backends.chain import _deploy

    w3, deployer = _connect(url)
    addresses = _deploy.deploy_contracts(w3, deployer, c0_decimals)
    return {"url": url, "addresses": addresses, "minter_key": DEPLOYER_KEY}


def fund(
    url: str, config: Mapping[str, Any], address: str, symbol: str, amount: str | Decimal
) -> str:
    """Mint USDC, USDT or c0, or send ETH (whole units) to `address` on the chain of a
    `deploy_contracts` configuration; returns the transaction hash once mined."""
    from .backends.chain import _deploy

    w3, deployer = _connect(url)
    return _deploy.fund(w3, deployer, config["addresses"], address, symbol, amount)


def _connect(url: str) -> tuple[Any, Any]:
    from eth_account import Account
    from web3 import HTTPProvider, Web3

    return Web3(HTTPProvider(url)), Account.from_key(DEPLOYER_KEY)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _wait_until_ready(node: AnvilNode) -> None:
    deadline = time.monotonic() + _STARTUP_TIMEOUT
    request = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if node.process.poll() is not None:
                node._log.seek(0)
                output = node._log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"anvil exited with {node.process.returncode}: {output}")
            try:
                if client.post(node.url, json=request).status_code == httpx.codes.OK:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    raise TimeoutError(f"anvil did not answer on {node.url} within {_STARTUP_TIMEOUT:.0f} s")


def _die_with_parent() -> None:
    """In the child (Linux): get SIGTERM when the process that started anvil dies, so a
    killed test run leaves no anvil behind."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)  # the group anvil leads (start_new_session)
