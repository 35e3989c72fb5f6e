"""An HTTP forwarder on loopback with injectable faults, for fault tests with real parts.

Put it in front of a real node (anvil) or the fake fiat provider and point the treasury
at `Forwarder.url`: every request is forwarded as it came, and the answer returned, until
a fault is armed. The faults are those a user's infrastructure produces:

* `cut` — forward the request (the upstream performs it), then close the connection
  without an answer: the client cannot know whether it happened;
* `fail_after` — forward it, then answer an HTTP error (a gateway's 5xx) instead of
  the upstream's answer;
* `down` / `up` — stop listening (connections are refused: nothing is sent), and
  listen again on the same port.

Faults apply to the next `times` requests that `when(method, path, body)` accepts
(`rpc("eth_sendRawTransaction")` matches a JSON-RPC method). Every answer closes its
connection, so no client keeps a connection across `down`.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

__all__ = ["Forwarder", "forwarder", "rpc"]

Match = Callable[[str, str, bytes], bool]


def rpc(method: str) -> Match:
    """Matches a JSON-RPC request (or batch) that calls `method`."""

    def match(_: str, __: str, body: bytes) -> bool:
        try:
            sent = json.loads(body or b"null")
        except ValueError:
            return False
        calls = sent if isinstance(sent, list) else [sent]
        return any(isinstance(c, dict) and c.get("method") == method for c in calls)

    return match


def anything(_: str, __: str, ___: bytes) -> bool:
    return True


@dataclass
class _Fault:
    kind: str  # "cut" or "fail"
    times: int
    when: Match
    status: int = 500


@dataclass
class Forwarder:
    """The forwarder's state: its upstream, the armed faults and what passed through."""

    upstream: str
    port: int = 0
    forwarded: list[tuple[str, str, bytes]] = field(default_factory=list)
    _faults: list[_Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self, times: int = 1, when: Match = anything) -> None:
        """Forward the next matching requests, then drop their connections unanswered."""
        with self._lock:
            self._faults.append(_Fault("cut", times, when))

    def fail_after(self, times: int = 1, status: int = 500, when: Match = anything) -> None:
        """Forward the next matching requests, then answer `status` instead."""
        with self._lock:
            self._faults.append(_Fault("fail", times, when, status))

    def down(self) -> None:
        """Stop listening: connections are refused until `up`."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def up(self) -> None:
        """Listen (again) on the same port."""
        if self._server is not None:
            return
        server = _Server(("127.0.0.1", self.port), _Handler)
        server.forwarder = self
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()

    def _fault(self, method: str, path: str, body: bytes) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and fault.when(method, path, body):
                    fault.times -= 1
                    return fault
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    forwarder: Forwarder

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        forwarder = self.server.forwarder
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = forwarder._fault(self.command, self.path, body)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        try:
            with httpx.Client(timeout=30) as client:
                answer = client.request(
                    self.command, forwarder.upstream + self.path, content=body, headers=headers
                )
        except httpx.HTTPError:
            self._answer(502, b'{"error": "upstream unreachable"}', "application/json")
            return
        with forwarder._lock:
            forwarder.forwarded.append((self.command, self.path, body))
        if fault is not None and fault.kind == "cut":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None:
            error = json.dumps({"code": "gateway", "message": "Bad gateway"}).encode()
            self._answer(fault.status, error, "application/json")
            return
        kind = answer.headers.get("content-type", "application/json")
        self._answer(answer.status_code, answer.content, kind)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    def _answer(self, status: int, data: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


_HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding"}


@contextmanager
def forwarder(upstream: str) -> Iterator[Forwarder]:
    """A `Forwarder` to `upstream` (scheme, host and port; paths are kept), listening on a
    free loopback port until the block ends."""
    found = Forwarder(upstream.rstrip("/"))
    found.up()
    try:
        yield found
    finally:
        found.down()
