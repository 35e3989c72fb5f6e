"""``treasury serve --processes N``: the /v1 API from N processes under gunicorn.

gunicorn binds the port and forks its workers; each worker opens its own treasury (pools,
chains and sockets never cross a fork) and, unless ``--no-worker``, runs the background
jobs in a thread as a single-process ``serve`` does: every job is safe for many workers.
What the processes share lives outside them: the database, the chains, and the rate-limit
counters in Redis.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from gunicorn.app.base import BaseApplication

from .._infra.jobs import RunSummary
from .._treasury import Treasury
from ..config import Settings
from ..http import create_app

log = logging.getLogger("treasury")
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Processes(BaseApplication):  # type: ignore[misc]  # gunicorn has no types
    """A gunicorn application whose workers each serve a treasury of `settings`."""

    def __init__(
        self,
        settings: Settings,
        options: dict[str, Any],
        *,
        jobs_every: float | None,
        on_pass: Callable[[RunSummary], None],
        trusted_proxy: str | None,
    ) -> None:
        self._settings, self._options = settings, options
        self._jobs_every, self._on_pass, self._proxy = jobs_every, on_pass, trusted_proxy
        super().__init__()

    def load_config(self) -> None:
        for name, value in self._options.items():
            if name in self.cfg.settings:  # e.g. control_socket_disable is gunicorn >= 25.1
                self.cfg.set(name, value)

    def load(self) -> WSGIApp:
        """In each worker, after the fork."""
        t = Treasury.open(settings=self._settings)
        if self._jobs_every is not None:
            t.run_in_background(self._jobs_every, self._on_pass)
        app: WSGIApp = with_send_timeout(create_app(t), t.settings.send_timeout_s)
        return behind_proxy(app, self._proxy) if self._proxy else app


def with_send_timeout(app: WSGIApp, seconds: float) -> WSGIApp:
    """Under gunicorn: the client's socket times out a send after `seconds` (a client
    that reads nothing is dropped then, and its thread freed); gunicorn writes each
    chunk of a streamed answer as it comes, so nothing is buffered whole."""

    def timed(environ: dict[str, Any], start_response: Any) -> Any:
        client = environ.get("gunicorn.socket")
        if client is not None:
            client.settimeout(seconds)
        return app(environ, start_response)

    return timed


def behind_proxy(app: WSGIApp, proxy: str) -> WSGIApp:
    """The client address from `proxy`'s ``X-Forwarded-For`` (its last entry, the one the
    proxy itself added); the header is dropped from anyone else, as waitress does."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        forwarded = environ.pop("HTTP_X_FORWARDED_FOR", None)
        if forwarded and environ.get("REMOTE_ADDR") == proxy:
            environ["REMOTE_ADDR"] = forwarded.rsplit(",", 1)[-1].strip()
        return app(environ, start_response)

    return wsgi
