"""The production server of ``treasury serve``: waitress, hardened against idle sockets
and oversized bodies, with its own errors in the JSON error body.

- Sockets are watched with ``poll()``, never ``select()`` (which fails at descriptor
  1024 and took the whole process down).
- The connection count is bounded, and a full server sheds instead of stopping to
  accept: each new connection closes the least recently active connection that has no
  request in service and nothing left to send (nginx reuses idle keep-alive connections
  the same way). Thousands of idle or half-sent sockets cannot lock real clients out,
  and the open descriptors never pass ``connection_limit`` (the process's open-files
  limit is raised to fit it).
- A streamed answer is held in memory only as far as the client lags behind, and at
  most `OUTPUT_WATERMARK` bytes of it (never spooled to disk): past that, the thread
  writing it waits for the client (back-pressure), and lends its place to a stand-in
  thread while it waits (`_Dispatcher`), so clients that never read cannot take every
  thread. A client that reads nothing for ``send_timeout_s`` is dropped (within a
  second of it, by the waiting thread or by the server loop's sweep).
- Waitress refuses a declared body above ``max_body_bytes`` before reading it, and a
  chunked one as soon as it passes the limit: nothing above it is ever spooled to disk.
  The request then goes to the app without its body, marked (`BODY_REFUSED`): the app
  answers the 413, and records it in the audit log of the API key's organization.
- What waitress answers itself (a malformed request line, headers above 256 KiB, an
  unsupported transfer coding) is the JSON error body too.
"""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from operator import attrgetter
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import ClientDisconnected, HTTPChannel
from waitress.server import MultiSocketServer, TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher, WSGITask
from waitress.utilities import RequestEntityTooLarge

from ._body import BODY_REFUSED

try:
    import resource
except ImportError:  # Windows: no descriptor limit to raise
    resource = None  # type: ignore[assignment]

log = logging.getLogger("treasury.http")

#: Descriptors kept free beside the connections: the listening socket, the database,
#: the chain's store, log files, outgoing HTTP.
SPARE_DESCRIPTORS = 256
_ACCEPTS_PER_WAKE = 64  # at most this many connections accepted per loop pass
_LAST_ACTIVITY = attrgetter("last_activity")
#: The bytes of an answer held for one client before its writer waits (back-pressure).
OUTPUT_WATERMARK = 256 * 1024
#: Past this, a buffered answer would go to a temporary file: never reached (a writer
#: waits at the watermark, and one write is a chunk of a few hundred rows).
_OVERFLOW = 64 * 1024 * 1024
#: At most this many stand-in threads at once (beyond `threads`).
MAX_STAND_INS = 64


class _JsonErrorTask(ErrorTask):  # type: ignore[misc]
    """Waitress's own refusals (400, 431, 501, 500), as the JSON error body."""

    def execute(self) -> None:
        error = self.request.error
        answer: dict[str, Any] = {"error": error.reason, "details": {"reason": error.body}}
        body = json.dumps(answer).encode()
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _RefusedBodyTask(WSGITask):  # type: ignore[misc]
    """A request whose body waitress refused unread (above the limit), handed to the app
    without a body and marked `BODY_REFUSED` (the limit): the app answers the 413 after
    the API key, so that the refusal is recorded in the key's organization's audit log.
    The connection closes after it (the body's bytes are still coming)."""

    def execute(self) -> None:
        self.set_close_on_finish()
        super().execute()

    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environment()
        environ["wsgi.input"] = io.BytesIO()
        environ[BODY_REFUSED] = self.channel.adj.max_request_body_size - 1
        return environ


def _error_task(channel: Any, request: Any) -> Any:
    """The task of a request waitress refused: the app's for a body too large."""
    if isinstance(request.error, RequestEntityTooLarge):
        return _RefusedBodyTask(channel, request)
    return _JsonErrorTask(channel, request)


class _Dispatcher(ThreadedTaskDispatcher):  # type: ignore[misc]
    """Waitress's pool of task threads, which lends a stand-in thread for each thread
    that waits for a slow client, up to `MAX_STAND_INS`."""

    def __init__(self, threads: int) -> None:
        super().__init__()
        self.base = threads
        self.lent = 0
        self.lending = threading.Lock()
        self.set_thread_count(threads)

    def lend(self) -> bool:
        with self.lending:
            if self.lent >= MAX_STAND_INS:
                return False
            self.lent += 1
            self.set_thread_count(self.base + self.lent)
            return True

    def give_back(self) -> None:
        with self.lending:
            self.lent -= 1
            self.set_thread_count(self.base + self.lent)


class _Channel(HTTPChannel):  # type: ignore[misc]
    error_task_class = staticmethod(_error_task)
    dropped = False  # set when its client read nothing for `send_timeout`

    def _flush_outbufs_below_high_watermark(self) -> None:
        """Wait (a task thread) until the client has taken the answer below the
        watermark: with a stand-in thread serving others meanwhile, and no longer than
        the server's `send_timeout` without progress (then the client is dropped)."""
        if self.total_outbufs_len <= self.adj.outbuf_high_watermark:
            return
        dispatcher, timeout = self.server.task_dispatcher, self.server.send_timeout
        lent = isinstance(dispatcher, _Dispatcher) and dispatcher.lend()
        try:
            with self.outbuf_lock:
                left, deadline = self.total_outbufs_len, time.monotonic() + timeout
                while self.connected and self.total_outbufs_len > self.adj.outbuf_high_watermark:
                    now = time.monotonic()
                    if self.total_outbufs_len < left:  # progress: the clock starts again
                        left, deadline = self.total_outbufs_len, now + timeout
                    if now >= deadline:
                        self.dropped = True
                        self.server.pull_trigger()
                        raise ClientDisconnected
                    self.server.pull_trigger()
                    self.outbuf_lock.wait(min(1.0, deadline - now))
        finally:
            if lent:
                dispatcher.give_back()

    def _flush_some(self, do_close: bool = True) -> bool:
        """Send what can be sent, then let go of what was sent: waitress's in-memory
        output buffer keeps every byte written to it until it is pruned, which it never
        is while a client keeps up, so a streamed answer would sit in memory whole."""
        sent: bool = super()._flush_some(do_close=do_close)
        drained = self.outbufs[0]
        if not drained and drained.buf is not None and not drained.overflowed:
            drained.prune()  # an empty in-memory buffer: a fresh one, nothing copied
        return sent


class _Server(TcpWSGIServer):  # type: ignore[misc]
    """A waitress TCP server that sheds its idlest connection when full."""

    channel_class = _Channel
    next_channel_cleanup: float = 0
    send_timeout: float = 30.0

    def readable(self) -> bool:
        now = time.time()
        if now >= self.next_channel_cleanup:  # waitress's idle timeout (channel_timeout)
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        self._drop_stalled(now)
        if len(self.active_channels) < self.adj.connection_limit:
            return bool(self.accepting)
        # full: accept only if a connection can be shed, else new ones wait in the backlog
        return bool(self.accepting) and any(_idle(c) for c in self.active_channels.values())

    def handle_accept(self) -> None:
        for _ in range(_ACCEPTS_PER_WAKE):
            if len(self.active_channels) >= self.adj.connection_limit and not self._shed():
                return
            before = len(self.active_channels)
            super().handle_accept()
            if len(self.active_channels) == before:  # nothing (more) was waiting
                return

    def _drop_stalled(self, now: float) -> None:
        """Close the connections whose client read nothing of a pending answer for
        `send_timeout` (or that a waiting writer gave up on). The loop's poll walks a
        copy of the map, so closing here is safe."""
        cutoff = now - self.send_timeout
        for channel in list(self.active_channels.values()):
            stalled = channel.total_outbufs_len and channel.last_activity < cutoff
            if channel.dropped or stalled:
                channel.handle_close()

    def _shed(self) -> bool:
        """Close the least recently active idle connection (False if none is idle)."""
        idle = [c for c in self.active_channels.values() if _idle(c)]
        if not idle:
            return False
        min(idle, key=_LAST_ACTIVITY).handle_close()
        return True


def _idle(channel: Any) -> bool:
    """No request in service, nothing left to send, not closing already."""
    return not (channel.requests or channel.total_outbufs_len or channel.will_close)


def create_server(
    app: Any,
    *,
    host: str,
    port: int,
    threads: int,
    connection_limit: int,
    channel_timeout: int,
    max_body_bytes: int,
    send_timeout: float = 30.0,
    **options: Any,
) -> Any:
    """A server for `app` on every address `host` names; call ``run()`` on it.
    `send_timeout`: seconds a client may read nothing of its answer before it is dropped."""
    adj = Adjustments(
        host=host,
        port=port,
        threads=threads,
        connection_limit=fit_open_files(connection_limit),
        channel_timeout=channel_timeout,
        cleanup_interval=min(channel_timeout, 30),
        max_request_body_size=max_body_bytes + 1,  # waitress refuses a length >= this
        # a body is held in memory up to the limit and what one read may bring past it
        # (waitress's own default, 512 KiB), never spooled to disk
        inbuf_overflow=max_body_bytes + 512 * 1024,
        asyncore_use_poll=True,
        outbuf_high_watermark=OUTPUT_WATERMARK,
        outbuf_overflow=_OVERFLOW,
        **options,
    )
    sockets: dict[int, Any] = {}
    dispatcher = _Dispatcher(adj.threads)
    servers = [
        _Server(app, sockets, dispatcher=dispatcher, adj=adj, sockinfo=info) for info in adj.listen
    ]
    for server in servers:
        server.send_timeout = send_timeout
    if len(servers) == 1:
        return servers[0]
    listening = [(s.effective_host, s.effective_port) for s in servers]
    return MultiSocketServer(sockets, adj, listening, dispatcher, servers[-1].log_info)


def fit_open_files(connection_limit: int) -> int:
    """Raise this process's open-files limit so that `connection_limit` connections fit
    (up to the hard limit); the connection limit that fits, lowered with a warning if
    the hard limit is too low."""
    wanted = connection_limit + SPARE_DESCRIPTORS
    if resource is None:
        return connection_limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft != resource.RLIM_INFINITY and soft < wanted:
        fitted = max(1, soft - SPARE_DESCRIPTORS)
        log.warning(
            "open-files limit %d (hard) fits %d connections, not %d", hard, fitted, connection_limit
        )
        return fitted
    return connection_limit
