"""A real threaded WSGI server on loopback, for tests and examples (it lives in
`treasury.http.loopback`, which the CLI's demo uses without the test tools)."""

from __future__ import annotations

from ..http.loopback import serve

__all__ = ["serve"]
