"""The Flask blueprint: authentication, body limits and JSON in, the core, JSON out."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from .._service import Organization, Treasury
from ..errors import (
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    TreasuryError,
    UnsupportedMediaType,
    ValidationError,
)
from ._errors import error_response, json_response, unexpected_response
from ._routes import ROUTES, Call, Route

_CATCH_ALL = "not_found"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def create_blueprint(
    treasury: Treasury, *, url_prefix: str = "/v1", name: str = "treasury"
) -> Blueprint:
    """Mount the /v1 API of `treasury` in any Flask app."""
    blueprint = Blueprint(name, __name__, url_prefix=url_prefix)
    for route in ROUTES:
        blueprint.add_url_rule(
            route.path, route.name, _view(treasury, route), methods=[route.method]
        )
    not_found = _guarded(_not_found(name))
    blueprint.add_url_rule("/", _CATCH_ALL, not_found, methods=_METHODS, strict_slashes=False)
    blueprint.add_url_rule("/<path:rest>", _CATCH_ALL, not_found, methods=_METHODS)
    return blueprint


def create_app(treasury: Treasury) -> Flask:
    """A standalone app serving the API under /v1; every error is the JSON error body."""
    app = Flask("treasury")
    app.register_blueprint(create_blueprint(treasury))

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> Response:
        return error_response(_from_http(error))

    @app.errorhandler(Exception)
    def _crash(error: Exception) -> Response:
        return unexpected_response(error)

    return app


def _guarded(view: Callable[..., Response]) -> Callable[..., Response]:
    """Every way out of a view is a JSON response."""

    def guarded(**params: Any) -> Response:
        try:
            return view(**params)
        except TreasuryError as error:
            if error.status == 500:  # a fault of ours, however it was raised
                return unexpected_response(error)
            return error_response(error)
        except HTTPException as error:
            return error_response(_from_http(error))
        except Exception as error:
            return unexpected_response(error)

    guarded.__name__ = view.__name__
    return guarded


def _view(treasury: Treasury, route: Route) -> Callable[..., Response]:
    max_body = treasury.settings.max_body_bytes

    def view(**params: Any) -> Response:
        org: Organization | None = None
        if not route.public:
            org = treasury.authenticate(request.headers.get("x-api-key"))
        body = _json_body(max_body) if route.method in ("POST", "PUT", "PATCH") else None
        call = Call(body, request.args.to_dict(), params, request.headers)
        status, result = route.handler(org, call)  # type: ignore[arg-type]
        headers = {"Idempotent-Replayed": "true"} if result.replayed else None
        return json_response(status, result.to_json(), headers)

    view.__name__ = route.name
    return _guarded(view)


def _json_body(max_bytes: int) -> Any:
    """The parsed JSON body; {} when empty. 413 over the limit, 415 if not JSON."""
    if request.content_length is not None and request.content_length > max_bytes:
        raise PayloadTooLarge(f"Request body exceeds {max_bytes} bytes")
    raw = _read_at_most(max_bytes)
    if not raw.strip():
        return {}
    if request.mimetype != "application/json":
        raise UnsupportedMediaType()
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValidationError(
            "Malformed JSON",
            {"fields": [{"location": "body", "field": "", "message": str(error)}]},
        ) from None
    if not isinstance(body, dict):
        raise ValidationError.field("body", "", "must be a JSON object")
    return body


def _read_at_most(max_bytes: int) -> bytes:
    """The body, read in chunks (chunked uploads have no length), or 413 past the limit."""
    parts, size = [], 0
    while chunk := request.stream.read(64 * 1024):
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"Request body exceeds {max_bytes} bytes")
        parts.append(chunk)
    return b"".join(parts)


def _not_found(blueprint_name: str) -> Callable[..., Response]:
    """Unknown paths under the prefix are 404; known paths with another method are 405."""

    def not_found(**_: Any) -> Response:
        adapter = current_app.url_map.bind_to_environ(request.environ)
        allowed = []
        for method in _METHODS:
            try:
                endpoint, _args = adapter.match(method=method)
            except HTTPException:
                continue
            if endpoint != f"{blueprint_name}.{_CATCH_ALL}":
                allowed.append(method)
        if allowed:
            error = MethodNotAllowed()
            error.allow = allowed  # type: ignore[attr-defined]
            raise error
        raise NotFound("No such endpoint")

    return not_found


def _from_http(error: HTTPException) -> TreasuryError:
    if isinstance(error, RequestEntityTooLarge):
        return PayloadTooLarge()
    translated = TreasuryError(error.description or error.name)
    translated.status = error.code or 500  # type: ignore[misc]
    return translated
