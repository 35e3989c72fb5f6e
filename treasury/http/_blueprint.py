"""The Flask blueprint, generated from the table of operations (`treasury.operations`),
and its OpenAPI document at ``openapi.json`` under the prefix.

Each method and path of the table becomes one route (two operations share one when a
query parameter selects the second): authenticate (unless public), read the JSON body,
`invoke` the core, answer with the operation's status, its caching, and
``Idempotent-Replayed`` when an Idempotency-Key replayed the answer. Every way out of a view is a
JSON response (`error_response`), and so is every path under the prefix that no
operation serves (404, or 405 with ``Allow``; ``OPTIONS`` too), also when mounted in a
host app. A path can name a route in one way only: integer ids are ASCII digits (full-width
or Arabic-Indic digits are not), and a path with an empty segment or an encoded slash
(``//v1/wallets``, ``/v1%2Fwallets``) is a 404, however the server normalized it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from flask import Blueprint, Flask, Response, current_app, request
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import HTTPException
from werkzeug.routing import BaseConverter

from .._infra import replays
from .._infra.models import CsvTable, Resource
from .._treasury import OrganizationHandle, Treasury
from ..errors import AuthenticationError, MethodNotAllowed, NotFound
from ..operations import (
    IDEMPOTENCY_HEADER,
    PATH_PARAM,
    PREFIX,
    Handle,
    Operation,
    Public,
    invoke,
    routes,
    selected,
)
from . import _access
from ._access import AccessLog
from ._body import BODY_REFUSED, json_body, refused_body, too_large
from ._errors import error_response
from ._openapi import openapi_document

_CATCH_ALL = "not_found"
_ANYTHING = "treasury_anything"
_DIGITS = "treasury_digits"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_UNSERVED = ("OPTIONS",)  # answered 405 with Allow, as any method a path does not take


def create_blueprint(
    treasury: Treasury, *, url_prefix: str = PREFIX, name: str = "treasury"
) -> Blueprint:
    """Mount the /v1 API of `treasury` in any Flask app."""
    blueprint = Blueprint(name, __name__, url_prefix=url_prefix)
    blueprint.record_once(_add_converters)
    blueprint.before_app_request(_aliased_path(url_prefix))
    blueprint.before_app_request(_refused_body(name))
    for operations in routes():
        blueprint.add_url_rule(
            flask_rule(operations[0]),
            endpoint(operations[0]),
            _guarded(_view(treasury, operations)),
            methods=[operations[0].method],
            merge_slashes=False,  # never a redirect: /v1//wallets is a 404
            provide_automatic_options=False,
        )
    document = json.dumps(openapi_document(url_prefix), indent=2)
    blueprint.add_url_rule(
        "/openapi.json",
        "openapi",
        lambda: Response(document, mimetype="application/json"),
        provide_automatic_options=False,
    )  # public, not rate-limited, and not an operation of the table
    not_found = _guarded(_not_found(name))
    for rule in ("/", f"/<{_ANYTHING}:rest>"):
        blueprint.add_url_rule(
            rule,
            _CATCH_ALL,
            not_found,
            methods=_METHODS + _UNSERVED,
            strict_slashes=False,
            merge_slashes=False,
            provide_automatic_options=False,
        )
    return blueprint


def create_app(treasury: Treasury | None = None) -> Flask:
    """A standalone app serving the API under /v1; every error is the JSON error body.

    Without a treasury it opens one from the ``TREASURY_*`` variables: the factory a
    multi-process server calls in each process (``gunicorn 'treasury.http:create_app()'``).
    """
    if treasury is None:
        treasury = Treasury.open()
    app = Flask("treasury")
    app.register_blueprint(create_blueprint(treasury))
    app.register_error_handler(Exception, error_response)
    app.wsgi_app = AccessLog(app.wsgi_app)  # type: ignore[method-assign]
    return app


class _Anything(BaseConverter):
    """Any rest of a path, empty segments and slashes included (the catch-all's)."""

    regex = ".*"
    part_isolating = False


_MOST_DIGITS = 19  # a 64-bit id; Python refuses int() of 4,301 digits and more


class _Digits(BaseConverter):
    """A non-negative integer in ASCII digits only (werkzeug's ``int`` takes any Unicode
    digit: a full-width "1" would be recipient 1)."""

    regex = "[0-9]+"
    part_isolating = True

    def to_python(self, value: str) -> int:
        digits = value.lstrip("0") or "0"
        if len(digits) > _MOST_DIGITS:
            return 2**63  # past any id: the operation's validation answers its 400
        return int(digits)

    def to_url(self, value: Any) -> str:
        return str(int(value))


def _add_converters(state: BlueprintSetupState) -> None:
    state.app.url_map.converters.setdefault(_ANYTHING, _Anything)
    state.app.url_map.converters.setdefault(_DIGITS, _Digits)


def _aliased_path(url_prefix: str) -> Callable[[], Response | None]:
    """A JSON 404 for a request whose path, as the client sent it, has an empty segment
    or an encoded slash, when it could otherwise reach the prefix (servers merge ``//``
    or decode ``%2F`` before the app sees the path)."""
    prefix = url_prefix.rstrip("/")

    def refuse() -> Response | None:
        environ = request.environ
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or ""
        sent = raw.split("?", 1)[0].split("#", 1)[0] or environ.get("PATH_INFO", "")
        if "//" not in sent and "%2f" not in sent.lower():
            return None
        path = re.sub("/+", "/", sent.replace("%2F", "/").replace("%2f", "/"))
        if path == prefix or path.startswith(f"{prefix}/"):
            return error_response(NotFound("No such endpoint"))
        return None

    return refuse


def _refused_body(blueprint_name: str) -> Callable[[], Response | None]:
    """The 413 of a request whose body the server refused unread (`BODY_REFUSED`) when
    it reaches no operation that takes an API key (those answer it themselves, after the
    key, so that it is recorded in the organization's audit log)."""
    keyed = {
        f"{blueprint_name}.{endpoint(operations[0])}"
        for operations in routes()
        if not operations[0].public
    }

    def refuse() -> Response | None:
        limit = request.environ.get(BODY_REFUSED)
        if limit is None or request.endpoint in keyed:
            return None
        return error_response(too_large(limit))

    return refuse


def flask_rule(operation: Operation[Any]) -> str:
    """The operation's path as a Flask rule: ``{id}`` of an integer becomes
    ``<treasury_digits:id>`` (ASCII digits only)."""
    integers = {param.name for param in operation.path_params if param.integer}

    def rule(match: re.Match[str]) -> str:
        name = match.group(1)
        converter = f"{_DIGITS}:" if name in integers else ""
        return f"<{converter}{name}>"

    return PATH_PARAM.sub(rule, operation.path)


def endpoint(operation: Operation[Any]) -> str:
    """The Flask endpoint of an operation (Flask forbids dots in endpoint names)."""
    return operation.name.replace(".", "_")


def _guarded(view: Callable[..., Response]) -> Callable[..., Response]:
    """Every way out of a view is a JSON response."""

    def guarded(**params: Any) -> Response:
        try:
            return view(**params)
        except Exception as raised:
            return error_response(raised)

    guarded.__name__ = view.__name__
    return guarded


def _view(treasury: Treasury, operations: Sequence[Operation[Any]]) -> Callable[..., Response]:
    max_body = treasury.settings.max_body_bytes
    only = operations[0] if len(operations) == 1 else None  # else the query selects one

    def view(**params: Any) -> Response:
        operation = only if only is not None else selected(operations, request.args, _prefers)
        if operation.public:
            return _answer(operation, treasury, params)
        request_id, new = _access.request_id(request.environ)
        org: OrganizationHandle | None = None
        try:  # a valid key past its limit: 429, recorded in its organization's log
            org = treasury.authenticate(
                request.headers.get("x-api-key"),
                client=_client(),
                operation=operation,
                path=params,
                request_id=request_id,
            )
            response = org.run(
                operation,
                lambda: _answer(operation, org, params),
                path=params,
                request_id=request_id,
            )
        except AuthenticationError as refused:  # no organization to record it for
            limit = request.environ.get(BODY_REFUSED)
            response = error_response(refused if limit is None else too_large(limit))
        except Exception as raised:
            response = error_response(raised)
        if org is not None and org.quota is not None:  # every answer to an authenticated
            response.headers.update(org.quota.headers)  # request says it
        if new:  # mounted in a host app: no access log sends it
            response.headers["X-Request-Id"] = request_id
        return response

    def _answer(
        operation: Operation[Any], root: Handle | Public, params: dict[str, Any]
    ) -> Response:
        refused_body()  # the server refused the body unread: 413, in the call (recorded)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        result = invoke(
            operation,
            root,
            path=params,
            query=request.args.to_dict() if operation.query is not None else {},
            body=json_body(max_body) if operation.body is not None else None,
            headers={IDEMPOTENCY_HEADER: key} if key is not None else {},
            chunked=operation.chunks is not None,
        )
        if operation.csv is not None:
            body = _csv_body(operation.csv, result)
            return Response(body, operation.status, mimetype="text/csv")
        if operation.chunks is not None:
            return Response(_list_body(result), operation.status, mimetype="application/json")
        replayed = replays.replayed(result)
        headers = {"Idempotent-Replayed": "true"} if replayed else None
        body = result.model_dump_json()  # pydantic's serializer: no dict in between
        if operation.cache == "forever":
            return _immutable(body)
        return Response(body, operation.status, headers, mimetype="application/json")

    view.__name__ = endpoint(operations[0])
    return view


def _list_body(chunks: Iterator[list[Resource]]) -> Iterator[bytes]:
    """``{"data": [...], "count": n}`` as `ListOf` writes it, byte for byte, written as the
    chunks come. The first chunk is read now, so that a failure is still an error answer."""
    first = next(chunks, [])

    def written() -> Iterator[bytes]:
        count = 0
        yield b'{"data":['
        for chunk in itertools.chain([first], chunks):
            if chunk:
                items = b",".join(item.model_dump_json().encode() for item in chunk)
                yield (b"," if count else b"") + items
                count += len(chunk)
        yield b'],"count":%d}' % count

    return written()


def _csv_body(table: CsvTable[Any], chunks: Iterator[list[Any]]) -> Iterator[bytes]:
    """The header row, then one row per item, written as the chunks come (the first read
    now, so that a failure is still an error answer). Cells as `csv` quotes them, None
    empty, a formula's first character neutralised (`CsvTable.cells`), lines ending
    CRLF (RFC 4180)."""
    first = next(chunks, [])

    def written() -> Iterator[bytes]:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(table.columns)
        for chunk in itertools.chain([first], chunks):
            writer.writerows(table.cells(item) for item in chunk)
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()

    return written()


def _immutable(body: str) -> Response:
    """An answer that never changes: a strong ETag of its bytes, public and cached for a
    year; 304 without a body when the client already holds it (If-None-Match)."""
    digest = hashlib.sha256(body.encode()).hexdigest()
    headers = {"ETag": f'"{digest}"', "Cache-Control": "public, max-age=31536000, immutable"}
    if request.if_none_match.contains_weak(digest):
        return Response(status=304, headers=headers)
    return Response(body, 200, headers, mimetype="application/json")


def _prefers(media_type: str) -> bool:
    """Whether the request's ``Accept`` header prefers `media_type` to JSON (no header,
    or ``*/*``: JSON)."""
    return request.accept_mimetypes.best_match(["application/json", media_type]) == media_type


def _client() -> str:
    """The client's address, as the WSGI server saw it (behind a reverse proxy, wrap the
    app in werkzeug's ProxyFix so that this is the forwarded address)."""
    return request.remote_addr or "unknown"


def _not_found(blueprint_name: str) -> Callable[..., Response]:
    """Unknown paths under the prefix are 404; known paths with another method are 405."""

    def not_found(**_: Any) -> Response:
        adapter = current_app.url_map.bind_to_environ(request.environ)
        allowed = []
        for method in _METHODS:
            try:
                found, _args = adapter.match(method=method)
            except HTTPException:
                continue
            if found != f"{blueprint_name}.{_CATCH_ALL}":
                allowed.append(method)
        if allowed:
            raise MethodNotAllowed(allowed)
        raise NotFound("No such endpoint")

    return not_found
