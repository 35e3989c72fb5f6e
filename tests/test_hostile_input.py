"""Hostile input against a server in a subprocess: nothing crashes it, nothing redirects."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from .conftest import MASTER_KEY, cli_storage
from .processes import clean_env, serving

ENV = {"TREASURY_MASTER_KEY": MASTER_KEY}


@pytest.fixture(scope="module")
def server(tmp_path_factory, module_storage_url):
    """`treasury serve` on a fresh database, after its first chain call (which imports
    web3, and py_ecc raises the recursion limit to 100,000)."""
    cwd = tmp_path_factory.mktemp("hostile")
    cli_storage(cwd, module_storage_url)
    init = subprocess.run(
        [sys.executable, "-m", "treasury.cli", "init", "--json"],
        cwd=cwd,
        env=clean_env(ENV),
        capture_output=True,
        text=True,
        check=True,
    )
    secret = json.loads(init.stdout)["apiKey"]["secret"]
    with serving(cwd, env=ENV) as running:
        client = httpx.Client(base_url=running.base, headers={"x-api-key": secret}, timeout=60)
        wallet = "0x" + "ab" * 20
        assert client.get(f"/31337/balances/{wallet}").status_code == 200
        yield running, client
        client.close()


def post(client: httpx.Client, raw: bytes) -> httpx.Response:
    headers = {"content-type": "application/json", "Idempotency-Key": "hostile"}
    return client.post("/wallets", content=raw, headers=headers)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[" * 100_000, "nests deeper than 64 levels"),
        (b'{"a":' * 2_000 + b"1" + b"}" * 2_000, "nests deeper than 64 levels"),
        (b'{"label": ' + b"9" * 5_000 + b"}", "has a number longer than 80 characters"),
        (b'{"label": 1' + b"0" * 400 + b".5}", "has a number longer than 80 characters"),
        (b'{"label": NaN}', "NaN is not JSON"),
        (b'{"label": "\\u00e9"' + b"}" * 70, "Extra data"),  # unbalanced: malformed
    ],
)
def test_deep_or_huge_json_is_400_and_the_server_lives(server, raw, message):
    running, client = server
    r = post(client, raw)
    assert r.status_code == 400, r.text
    assert message in r.json()["details"]["fields"][0]["message"]
    assert running.alive()
    assert client.get("/wallets").status_code == 200


def test_nesting_inside_strings_does_not_count(server):
    _, client = server
    label = "[" * 99  # 99 brackets, in a string: depth 1
    r = post(client, json.dumps({"label": label}).encode())
    assert r.status_code == 201 and r.json()["label"] == label


def test_empty_segments_and_trailing_slashes_are_json_404_never_a_redirect(server):
    running, _ = server
    for path in ("//wallets", "/wallets/", "/wallets//", "", "/"):
        raw = raw_get(running.base.removesuffix("/v1"), "/v1" + path, host="evil.example")
        status_line, _, rest = raw.partition(b"\r\n")
        assert status_line.split()[1] == b"404", (path, raw[:200])
        assert b"\r\nlocation:" not in rest.lower()
        assert b"application/json" in rest.lower()


def raw_get(base: str, path: str, host: str) -> bytes:
    """A GET with the path exactly as given (clients normalise `//`) and a foreign Host."""
    address = base.removeprefix("http://")
    hostname, port = address.split(":")
    with socket.create_connection((hostname, int(port)), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        deadline = time.monotonic() + 10
        while chunk := s.recv(65536):
            chunks.append(chunk)
            assert time.monotonic() < deadline
        return b"".join(chunks)


@pytest.mark.parametrize("path", ["//v1/wallets", "///v1/wallets", "/v1%2Fwallets", "//v1/"])
def test_a_doubled_slash_before_v1_or_an_encoded_one_is_json_404(server, path):
    running, _ = server
    raw = raw_get(running.base.removesuffix("/v1"), path, host="x")
    status_line, _, rest = raw.partition(b"\r\n")
    assert status_line.split()[1] == b"404", (path, raw[:300])
    assert b"application/json" in rest.lower() and rest.endswith(b'{"error": "No such endpoint"}')


def test_options_is_json_405_without_a_key(server):
    running, _ = server
    r = httpx.options(f"{running.base}/wallets")
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST"
    assert r.json() == {"error": "Method not allowed", "details": {"allow": ["GET", "POST"]}}


def test_unicode_digit_ids_delete_nothing_through_the_server(server):
    _, client = server
    made = client.post(
        "/recipients",
        json={"address": "0x" + "cd" * 20, "label": "Kept"},
        headers={"Idempotency-Key": "kept"},
    ).json()
    for zero in (0xFF10, 0x0660):  # full-width and Arabic-Indic digits
        spelled = "".join(chr(zero + int(d)) for d in str(made["id"]))
        encoded = "".join(f"%{b:02X}" for b in spelled.encode())
        assert client.delete(f"/recipients/{encoded}").status_code == 404
    assert "Kept" in [r["label"] for r in client.get("/recipients").json()["data"]]


_HEAD = b"GET /v1/wallets HTTP/1.1\r\nHost: x\r\nX-Big: "


def raw_exchange(base: str, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `data` as is; the status, headers and body of the answer."""
    hostname, port = base.removeprefix("http://").removesuffix("/v1").split(":")
    with socket.create_connection((hostname, int(port)), timeout=10) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),  # a malformed request line
        (b"GET /v1/wallets HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400),
        (_HEAD.ljust(256 * 1024, b"a"), 431),  # 256 KiB of header (all read: no reset)
        (b"POST /v1/wallets HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000000\r\n\r\n", 413),
        (b"POST /v1/wallets HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    ],
)
def test_errors_the_server_answers_itself_are_the_json_error_body(server, request_bytes, status):
    running, _ = server
    got, headers, body = raw_exchange(running.base, request_bytes)
    assert got == status, body
    assert headers["content-type"] == "application/json"
    error = json.loads(body)
    assert isinstance(error["error"], str) and set(error) <= {"error", "details"}
    assert running.alive()


def _every_path_with(value: str) -> list[tuple[str, str]]:
    """(method, path under /v1) of every operation that has a path parameter, each
    parameter spelled `value`."""
    from treasury.operations import OPERATIONS, PATH_PARAM

    found = []
    for operation in OPERATIONS:
        if operation.path_params:
            path = PATH_PARAM.sub(lambda _: value, operation.path)
            found.append((operation.method, path.removeprefix("/v1")))
    return sorted(set(found))


@pytest.mark.parametrize("digits", [4_301, 5_000, 20])
def test_oversized_ids_on_every_operation_are_never_a_5xx(server, digits):
    """Path ids of 4,301 digits and more (Python's int() refuses them) and ids past
    64 bits, with and without an API key, on every operation that takes one."""
    running, client = server
    paths = _every_path_with("9" * digits) + _every_path_with("0" * digits + "1")
    with httpx.Client(base_url=running.base, timeout=60) as anonymous:
        for method, path in paths:
            for who in (client, anonymous):
                answer = who.request(method, path, json={}, headers={"Idempotency-Key": "x"})
                assert answer.status_code < 500, (method, path[:40], answer.text)
                assert answer.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize(
    "bound",
    [
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-14:00",
        "0001-01-01T00:00:00-00:01",
        "9" * 5_000,
    ],
)
def test_extreme_time_offsets_on_every_query_are_never_a_5xx(server, bound):
    """Every GET with a query, each of its time-like parameters at an extreme offset."""
    _, client = server
    for path in ("/transfers/export", "/transfers", "/audit-events", "/statements"):
        params = {"from": bound, "to": bound, "at": bound, "cursor": bound, "limit": bound}
        answer = client.get(path, params=params)
        assert answer.status_code < 500, (path, answer.text)
