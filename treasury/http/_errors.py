"""The one place where errors become HTTP responses."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from flask import Response

from ..errors import TreasuryError

log = logging.getLogger("treasury.http")


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status=status, headers=headers, mimetype="application/json")


def error_response(error: TreasuryError) -> Response:
    headers: dict[str, str] = {}
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    if error.replayed:
        headers["Idempotent-Replayed"] = "true"
    allow = getattr(error, "allow", None)
    if allow:
        headers["Allow"] = ", ".join(allow)
    return json_response(error.status, error.to_body(), headers)


def unexpected_response(exc: BaseException) -> Response:
    """A 500 with a request id to quote, and never a stack trace in the body."""
    request_id = uuid.uuid4().hex
    log.error("unexpected error, request id %s", request_id, exc_info=exc)
    return json_response(
        500, {"error": "Internal server error", "details": {"requestId": request_id}}
    )
