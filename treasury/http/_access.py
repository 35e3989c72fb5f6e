"""One access-log line per request of the standalone app: method, path, status, time and
the request's id (also sent as ``X-Request-Id``). Never a header, a query or a body, so
never a key or a secret."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("treasury.access")

REQUEST_ID = "treasury.request_id"  # the WSGI environ key the error handler reads


def request_id(environ: dict[str, Any]) -> tuple[str, bool]:
    """The request's id, which the access log gave it (standalone app), else a new one
    kept in `environ` for the rest of the request; and whether it is new (then no access
    log sends it: the answer should)."""
    given = environ.get(REQUEST_ID)
    if isinstance(given, str):
        return given, False
    made = environ[REQUEST_ID] = new_request_id()
    return made, True


def new_request_id() -> str:
    """16 random hexadecimal digits."""
    return secrets.token_hex(8)


class AccessLog:
    """WSGI middleware around the app that `create_app` builds."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        started, request_id = time.perf_counter(), new_request_id()
        environ[REQUEST_ID] = request_id

        def respond(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
            headers.append(("X-Request-Id", request_id))
            if log.isEnabledFor(logging.INFO):  # its parts are made only to be logged
                elapsed = (time.perf_counter() - started) * 1000
                path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
                log.info(
                    "%s %s %s %.1f ms %s",
                    environ.get("REQUEST_METHOD", "-"),
                    _printable(path),
                    status.split(" ", 1)[0],
                    elapsed,
                    request_id,
                )
            return start_response(status, headers, *args)

        return self.app(environ, respond)


def _printable(path: str) -> str:
    """The path as one safe log token: control characters and spaces escaped, bounded."""
    shown = path
    if not path.isprintable() or " " in path:  # else (most paths) nothing to escape
        shown = "".join(c if c.isprintable() and c != " " else f"%{ord(c):02X}" for c in path)
    return shown if len(shown) <= 200 else shown[:200] + "…"
