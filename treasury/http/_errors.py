"""The one place where anything raised becomes an HTTP response."""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Response, has_request_context, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from ..errors import PayloadTooLarge, TreasuryError
from ._access import new_request_id, request_id

log = logging.getLogger("treasury.http")


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status=status, headers=headers, mimetype="application/json")


def error_response(raised: BaseException) -> Response:
    """The specification's JSON error body for anything raised while serving /v1:
    a `TreasuryError` with its status and headers, a framework error with its status,
    and anything else (ours to fix) a 500 with a request id and never a stack trace."""
    error = _as_treasury_error(raised)
    if error.status == 500:  # a fault of ours, however it was raised
        request_id = _request_id()
        log.error("unexpected error, request id %s", request_id, exc_info=raised)
        body = {"error": "Internal server error", "details": {"requestId": request_id}}
        return json_response(500, body)
    return json_response(error.status, error.to_body(), error.headers)


def _request_id() -> str:
    """The id of this request (`request_id`), else a new one."""
    return request_id(request.environ)[0] if has_request_context() else new_request_id()


def _as_treasury_error(raised: BaseException) -> TreasuryError:
    if isinstance(raised, TreasuryError):
        return raised
    if isinstance(raised, RequestEntityTooLarge):
        return PayloadTooLarge()
    if isinstance(raised, HTTPException):
        error = TreasuryError(raised.description or raised.name)
        error.status = raised.code or 500  # type: ignore[misc]
        return error
    return TreasuryError()
