"""Opaque, tamper-evident page cursors bound to one list of one organization.

A cursor is ``<payload>.<tag>``: the base64url JSON of a keyset position and an
HMAC-SHA256 tag over the list's name, the organization id and that payload, keyed by a
subkey of the master key. A malformed or forged cursor, or one of another organization
or another list, is a 400.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

from ..backends.storage.base import Row
from ..errors import ValidationError

_TAG_BYTES = 16


class Cursors:
    """The cursors of one list (e.g. ``"transfers"``)."""

    def __init__(self, key: bytes, list_name: str) -> None:
        self._key, self._list = key, list_name

    def encode(self, org_id: str, position: tuple[Any, Any]) -> str:
        payload = _b64(json.dumps(list(position), separators=(",", ":")).encode())
        return f"{payload}.{_b64(self._tag(org_id, payload))}"

    def decode(self, org_id: str, cursor: str) -> tuple[Any, Any]:
        """The position a cursor names, or a 400 on the `cursor` query parameter."""
        payload, _, tag = cursor.partition(".")
        try:
            valid = hmac.compare_digest(_unb64(tag), self._tag(org_id, payload))
            position = json.loads(_unb64(payload)) if valid else None
        except ValueError:
            position = None
        if not (isinstance(position, list) and len(position) == 2):
            raise ValidationError.field("query", "cursor", "is not a cursor of this list")
        return position[0], position[1]

    def _tag(self, org_id: str, payload: str) -> bytes:
        message = f"{self._list}\n{org_id}\n{payload}".encode()
        return hmac.new(self._key, message, hashlib.sha256).digest()[:_TAG_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    if not text.isascii():
        raise ValueError("not base64")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def page_of(
    cursors: Cursors,
    org_id: str,
    query: Any,
    fetch: Callable[[tuple[Any, Any] | None, int], tuple[list[Row], tuple[Any, Any] | None]],
) -> tuple[list[Row], str | None]:
    """One page of a keyset list: the rows after `query.cursor` (decoded, or a 400) as
    `fetch(after, limit)` reads them, and the cursor of the next page (None on the last)."""
    after = None if query.cursor is None else cursors.decode(org_id, query.cursor)
    rows, last = fetch(after, query.limit)
    return rows, None if last is None else cursors.encode(org_id, last)
