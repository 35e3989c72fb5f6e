"""A real threaded WSGI server on loopback: the demo's, the examples' and the tests'."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from werkzeug.serving import make_server


@contextmanager
def serve(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve `app` on a free port in a background thread; yield its base URL."""
    server = make_server(host, 0, app, threaded=True)
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="treasury-loopback", daemon=True
    )
    thread.start()
    try:
        yield f"http://{host}:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
