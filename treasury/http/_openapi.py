"""The OpenAPI 3.1 document of the /v1 API, read from the table of operations.

Each route of the table (`routes`: an operation, or two of one method and path that a
query parameter tells apart, documented as one with both answers) gives a path and method, its parameters (path, query, the
Idempotency-Key header), its request body and success response from the pydantic
models (JSON Schema 2020-12, which OpenAPI 3.1 uses as it is), and the error responses it
can give, each with the error body. The API key is the one security scheme; public
operations need none. ``nox -s openapi`` writes it to docs/openapi.json.
"""

from __future__ import annotations

import functools
import json
import operator
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter

from ..operations import IDEMPOTENCY_HEADER, PREFIX, Operation, routes

__all__ = ["openapi_document", "write"]

_REF = "#/components/schemas/{model}"
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string", "description": "What went wrong"},
        "details": {
            "type": "object",
            "description": "More, when there is more: `fields` for a 400, `code` for a 409",
        },
    },
}
_WHY = {
    400: "Invalid input: `details.fields` lists every failing field",
    401: "API key required, unknown or expired",
    403: "Forbidden: the key lacks the operation's scope (`details.required_scope`), or four eyes",
    404: "Not found",
    409: "Conflict, or the same Idempotency-Key still in flight (`details.code`)",
    413: "Request body too large",
    415: "Request body is not JSON",
    422: "Idempotency-Key reused with another request",
    429: "Rate limited (`Retry-After`)",
    500: "Internal error (`details.requestId`)",
    502: "An upstream service (chain, fiat provider, custody) failed",
}


def openapi_document(prefix: str = PREFIX) -> dict[str, Any]:
    """The whole document, with every path under `prefix`."""
    schemas: dict[str, Any] = {"Error": _ERROR}
    paths: dict[str, dict[str, Any]] = {}
    for operations in routes():
        first = operations[0]
        item = paths.setdefault(prefix + first.path, {})
        item[first.method.lower()] = _operation(operations, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "treasury",
            "version": "1",
            "description": "Wallets, bank accounts, recipients, transfers, transactions, "
            "balances, yield and webhooks of one organization, by its API key.",
        },
        "servers": [{"url": "/"}],
        "security": [{"ApiKey": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"ApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}},
            "schemas": dict(sorted(schemas.items())),
        },
    }


def _operation(operations: Sequence[Operation[Any]], schemas: dict[str, Any]) -> dict[str, Any]:
    """One route: the first operation, with the query parameters and answers of all."""
    operation = operations[0]
    parameters = [
        {"name": p.name, "in": "path", "required": True, "schema": _schema(p.type, schemas)}
        for p in operation.path_params
    ]
    parameters += _queries(operations, schemas)
    if operation.idempotency is not None:
        parameters.append(
            {
                "name": IDEMPOTENCY_HEADER,
                "in": "header",
                "required": operation.idempotency == "required",
                "description": "Replays the first outcome for 24 hours",
                "schema": {"type": "string", "minLength": 1, "maxLength": 256},
            }
        )
    as_json = [op.response for op in operations if op.csv is None]
    content: dict[str, Any] = {}
    if as_json:
        response = functools.reduce(operator.or_, as_json)
        content["application/json"] = {"schema": _schema(response, schemas)}
    for csv in (op for op in operations if op.csv is not None):  # the same route as CSV
        assert csv.csv is not None
        header = ",".join(csv.csv.columns)
        chosen = " (with Accept: text/csv)" if csv.accept is not None else ""
        content["text/csv"] = {
            "schema": {"type": "string", "description": f"Header: {header}{chosen}"}
        }
    answer: dict[str, Any] = {
        "operationId": operation.name,
        "summary": operation.summary,
        "tags": [operation.name.partition(".")[0]],
        "parameters": parameters,
        "responses": {
            str(operation.status): {"description": "Success", "content": content},
            **{str(status): _error(status) for status in _errors(operation)},
        },
    }
    if operation.body is not None:
        body = _schema(operation.body, schemas, mode="validation")
        answer["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body}},
        }
    if operation.public:
        answer["security"] = []
    return answer


def _errors(operation: Operation[Any]) -> list[int]:
    """The error statuses an operation can answer."""
    statuses = [400, 404, 429, 500, 502]
    if not operation.public:
        statuses.append(401)
    if operation.body is not None:
        statuses += [413, 415]
    if operation.idempotency is not None or operation.method in ("POST", "PATCH"):
        statuses.append(409)
    elif any(param.chain for param in operation.path_params):
        statuses.append(409)  # the chain may lack an address it needs (`Chain.address`)
    if operation.idempotency is not None:
        statuses.append(422)
    if not operation.public:
        statuses.append(403)  # a key without the operation's scope (and four eyes)
    return sorted(statuses)


def _error(status: int) -> dict[str, Any]:
    return {
        "description": _WHY[status],
        "content": {"application/json": {"schema": {"$ref": _REF.format(model="Error")}}},
    }


def _schema(kind: Any, schemas: dict[str, Any], mode: str = "serialization") -> dict[str, Any]:
    """The JSON Schema of a type, its models moved into the shared `schemas`."""
    schema = TypeAdapter(kind).json_schema(mode=mode, ref_template=_REF)  # type: ignore[arg-type]
    schemas.update(schema.pop("$defs", {}))
    if isinstance(kind, type) and issubclass(kind, BaseModel) and "properties" in schema:
        name = re.sub(r"[^a-zA-Z0-9.\-_]", "_", kind.__name__)  # as pydantic names $defs
        schemas[name] = schema  # a model is named, and referred to
        return {"$ref": _REF.format(model=name)}
    return schema


def _queries(operations: Sequence[Operation[Any]], schemas: dict[str, Any]) -> list[dict[str, Any]]:
    """The query parameters of a route's operations, each once: required when every
    operation of the route requires it."""
    found: dict[str, dict[str, Any]] = {}
    requiring: dict[str, int] = {}
    for operation in operations:
        query = operation.query
        for parameter in _query(query, schemas) if query is not None else []:
            name = parameter["name"]
            found.setdefault(name, parameter)
            requiring[name] = requiring.get(name, 0) + parameter["required"]
    for name, parameter in found.items():
        parameter["required"] = requiring[name] == len(operations)
    return list(found.values())


def _query(model: type[BaseModel], schemas: dict[str, Any]) -> list[dict[str, Any]]:
    """One query parameter per field of the query model, by its alias."""
    schema = model.model_json_schema(by_alias=True, mode="validation", ref_template=_REF)
    schemas.update(schema.pop("$defs", {}))
    required = set(schema.get("required", ()))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": field}
        for name, field in schema["properties"].items()
    ]


def write(path: str) -> None:
    """Write the document (under /v1) to `path`, as ``nox -s openapi`` does."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps(openapi_document(), indent=2) + "\n")
