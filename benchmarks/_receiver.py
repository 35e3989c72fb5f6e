"""A webhook receiver (what a customer's endpoint would be), run as a separate process by
webhooks.py.

    python benchmarks/_receiver.py

A real threaded HTTP/1.1 server on 127.0.0.1 (``http.server.ThreadingHTTPServer``, a
thread per keep-alive connection) on a free port, which it prints on stdout as one line
once it listens. It serves until its stdin closes. Standard library only, so that the
process starts fast and imports nothing of the sender's.

* ``POST <any path>``: a delivery. The body is read in full and the Standard Webhooks
  signature is checked as a receiver would (``webhook-signature`` = ``v1,<base64
  HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`` keyed by the base64-decoded
  secret after ``whsec_``); the answer is ``204 No Content``. Every delivery is counted,
  with its ``webhook-id``, and so is every bad or missing signature.
* ``PUT /secret``: the body is the ``whsec_`` secret to check signatures with (set once
  the webhook is registered, before any delivery).
* ``GET /stats``: ``{"received", "unique", "bad_signatures"}`` since the last
  ``POST /reset``, as JSON; ``unique`` counts distinct ``webhook-id`` values.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.key = b""
        self.received = 0
        self.bad = 0
        self.ids: set[str] = set()


STATE = State()


def signature_ok(key: bytes, message_id: str, timestamp: str, body: bytes, header: str) -> bool:
    expected = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)
    wanted = "v1," + base64.b64encode(expected.digest()).decode()
    return any(hmac.compare_digest(wanted, given) for given in header.split())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a production endpoint

    def log_message(self, format: str, *args: object) -> None:
        pass  # no line per request

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_POST(self) -> None:
        body = self._body()
        if self.path == "/reset":
            with STATE.lock:
                STATE.received, STATE.bad = 0, 0
                STATE.ids.clear()
            self._answer(204)
            return
        message_id = self.headers.get("webhook-id", "")
        ok = signature_ok(
            STATE.key,
            message_id,
            self.headers.get("webhook-timestamp", ""),
            body,
            self.headers.get("webhook-signature", ""),
        )
        with STATE.lock:
            STATE.received += 1
            STATE.bad += not ok
            STATE.ids.add(message_id)
        self._answer(204)

    def do_PUT(self) -> None:
        secret = self._body().decode()
        STATE.key = base64.b64decode(secret.removeprefix("whsec_"))
        self._answer(204)

    def do_GET(self) -> None:
        with STATE.lock:
            stats = {
                "received": STATE.received,
                "unique": len(STATE.ids),
                "bad_signatures": STATE.bad,
            }
        self._answer(200, json.dumps(stats).encode())


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def main() -> int:
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name="receiver", daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # until the parent closes our stdin (or dies)
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
