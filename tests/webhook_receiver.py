"""A webhook receiver for tests: a real HTTP server on loopback that records what it got
and answers as the test scripts it (a status, a Retry-After, a redirect, failures)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, Response, request
from standardwebhooks.webhooks import Webhook

from treasury.testing.server import serve


@dataclass
class Received:
    path: str
    headers: dict[str, str]  # lowercase names
    body: bytes
    port: int = 0  # the sender's port: which process sent it

    @property
    def message_id(self) -> str:
        return self.headers["webhook-id"]

    def payload(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str
    got: list[Received] = field(default_factory=list)
    #: answers the next requests get, in order: a status, or (status, headers)
    script: list[int | tuple[int, dict[str, str]]] = field(default_factory=list)
    #: or a function deciding each answer (after the script runs out)
    decide: Callable[[Received], int] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def at(self, path: str = "/hook") -> str:
        return self.url + path

    def ids(self) -> list[str]:
        with self.lock:
            return [r.message_id for r in self.got]


@contextmanager
def receiving() -> Iterator[Receiver]:
    app = Flask("receiver")
    receiver = Receiver(url="")

    @app.route("/<path:path>", methods=["POST"])
    def hook(path: str) -> Response:
        headers = {k.lower(): v for k, v in request.headers}
        port = int(request.environ.get("REMOTE_PORT") or 0)
        got = Received("/" + path, headers, request.get_data(), port)
        with receiver.lock:
            receiver.got.append(got)
            answer = receiver.script.pop(0) if receiver.script else None
        if answer is None:
            answer = receiver.decide(got) if receiver.decide else 204
        status, headers = answer if isinstance(answer, tuple) else (answer, {})
        return Response(b"", status=status, headers=headers)

    with serve(app) as url:
        receiver.url = url
        yield receiver


def verify_standard(secret: str, received: Received) -> dict[str, Any]:
    """Verified with the `standardwebhooks` library, as a receiver would."""
    result: dict[str, Any] = Webhook(secret).verify(received.body, received.headers)
    return result


def verify_original(secret: str, received: Received) -> bool:
    """The original service's ``X-Webhook-Signature: t=…,v1=<hex>`` (key: text after whsec_)."""
    parts = dict(item.split("=", 1) for item in received.headers["x-webhook-signature"].split(","))
    key = secret.removeprefix("whsec_").encode()
    expected = hmac.new(key, f"{parts['t']}.".encode() + received.body, hashlib.sha256)
    return hmac.compare_digest(parts["v1"], expected.hexdigest())
