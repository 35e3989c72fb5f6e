"""Every error, whatever its status, is the specification's JSON error body."""

from __future__ import annotations

import httpx
from flask import Flask

from treasury.http import create_blueprint
from treasury.testing.server import serve


def assert_error_body(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert isinstance(body["error"], str) and body["error"]
    assert set(body) <= {"error", "details"}
    return body


def test_unknown_path_is_404(client):
    assert_error_body(client.get("/v1/nothing-here"), 404)
    assert_error_body(client.get("/v1"), 404)  # not a redirect to /v1/
    assert_error_body(client.get("/elsewhere"), 404)


def test_wrong_method_is_405_with_allow(client):
    r = client.put("/v1/recipients", json={})
    assert_error_body(r, 405)
    assert set(r.headers["Allow"].split(", ")) == {"GET", "POST"}


def test_oversized_body_is_413_and_nothing_written(client):
    r = client.post(
        "/v1/recipients",
        content=b'{"label": "' + b"x" * 1_100_000 + b'"}',  # above max_body_bytes (1 MiB)
        headers={"content-type": "application/json", "Idempotency-Key": "big"},
    )
    assert_error_body(r, 413)
    assert client.get("/v1/recipients").json()["count"] == 0


def test_oversized_chunked_body_is_413(client):
    def chunks():
        for _ in range(1100):  # 1,100 KiB: above max_body_bytes (1 MiB)
            yield b"x" * 1024

    r = client.post("/v1/webhooks", content=chunks(), headers={"content-type": "application/json"})
    assert_error_body(r, 413)


def test_wrong_content_type_is_415(client):
    r = client.post(
        "/v1/wallets/track",
        content=b"address=0x1&label=x",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert_error_body(r, 415)
    assert client.get("/v1/wallets").json()["count"] == 0


def test_malformed_json_is_400(client):
    r = client.post(
        "/v1/wallets/track", content=b'{"address": ', headers={"content-type": "application/json"}
    )
    body = assert_error_body(r, 400)
    assert body["error"] == "Malformed JSON"
    assert body["details"]["fields"][0]["location"] == "body"


def test_json_that_is_not_an_object_is_400(client):
    r = client.post("/v1/wallets/track", json=["not", "an", "object"])
    assert_error_body(r, 400)


def test_unexpected_failure_is_500_with_a_request_id_and_no_trace(client, treasury, caplog):
    with treasury.storage.transaction() as tx:  # a real fault: the table is gone
        tx.execute("DROP TABLE recipients")
    r = client.get("/v1/recipients")
    body = assert_error_body(r, 500)
    assert body["error"] == "Internal server error"
    request_id = body["details"]["requestId"]
    assert "Traceback" not in r.text and "sqlite" not in r.text.lower()
    assert any(request_id in record.getMessage() for record in caplog.records)


def test_mounted_in_a_host_app_the_host_keeps_its_own_routes(treasury, tenant):
    host = Flask("host")

    @host.get("/health")
    def health() -> str:
        return "ok"

    host.register_blueprint(create_blueprint(treasury))
    with serve(host) as url:
        assert httpx.get(url + "/health").text == "ok"
        assert (
            httpx.get(url + "/v1/wallets", headers={"x-api-key": tenant.secret}).status_code == 200
        )
        assert_error_body(httpx.get(url + "/v1/missing"), 404)
        assert_error_body(httpx.delete(url + "/v1/wallets"), 405)
