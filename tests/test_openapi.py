"""The OpenAPI 3.1 document: valid, every operation of the table and only those, served
without a key under the mounted prefix, and the committed docs/openapi.json current."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from flask import Flask
from openapi_spec_validator import validate

from treasury.http import create_blueprint
from treasury.http._openapi import openapi_document
from treasury.operations import OPERATIONS
from treasury.testing.server import serve

COMMITTED = Path(__file__).resolve().parent.parent / "docs" / "openapi.json"
METHODS = {"get", "post", "patch", "delete", "put"}


def operations(document: dict) -> dict[tuple[str, str], dict]:
    return {
        (method.upper(), path): spec
        for path, item in document["paths"].items()
        for method, spec in item.items()
        if method in METHODS
    }


def test_the_document_is_valid_openapi_3_1_with_every_operation_and_only_those():
    document = openapi_document()
    validate(document)  # raises on any violation of the OpenAPI 3.1 schema
    assert document["openapi"] == "3.1.0"
    listed = operations(document)
    assert set(listed) == {(op.method, "/v1" + op.path) for op in OPERATIONS}
    assert sorted(spec["operationId"] for spec in listed.values()) == sorted(
        op.name for op in OPERATIONS if op.selected_by is None and op.accept is None
    )  # one of two operations told apart by a query parameter or Accept names their route
    for op in OPERATIONS:
        spec = listed[(op.method, "/v1" + op.path)]
        assert str(op.status) in spec["responses"]
        for status in ("400", "404", "500"):  # every error with the error body
            content = spec["responses"][status]["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/Error"}
        header = [p for p in spec["parameters"] if p["name"] == "Idempotency-Key"]
        if op.idempotency is None:
            assert header == []
        else:
            assert header[0]["in"] == "header"
            assert header[0]["required"] is (op.idempotency == "required")
        assert ("security" in spec and spec["security"] == []) is op.public
        assert ("401" not in spec["responses"]) is op.public
        assert {p["name"] for p in spec["parameters"] if p["in"] == "path"} == {
            p.name for p in op.path_params
        }
        assert ("requestBody" in spec) is (op.body is not None)
        if op.accept is not None:  # the same route's answer in that media type
            assert op.accept in spec["responses"][str(op.status)]["content"]
        if op.selected_by is not None:  # its parameter is in the route's, not required
            (selector,) = [p for p in spec["parameters"] if p["name"] == op.selected_by]
            assert selector["in"] == "query" and selector["required"] is False
    scheme = document["components"]["securitySchemes"]["ApiKey"]
    assert scheme == {"type": "apiKey", "in": "header", "name": "x-api-key"}


def test_the_committed_copy_is_current():
    assert json.loads(COMMITTED.read_text()) == openapi_document(), (
        "docs/openapi.json is stale: run `nox -s openapi`"
    )


def test_it_is_served_without_a_key_under_the_prefix(treasury, base_url):
    answer = httpx.get(f"{base_url}/v1/openapi.json")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == json.loads(COMMITTED.read_text())
    host = Flask("host")
    host.register_blueprint(create_blueprint(treasury, url_prefix="/api/treasury"))
    with serve(host) as url:
        mounted = httpx.get(f"{url}/api/treasury/openapi.json").json()
    assert "/api/treasury/wallets" in mounted["paths"] and "/v1/wallets" not in mounted["paths"]
