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
        cwd=cwd, env=clean_env(ENV), capture_output=True, text=True, check=True,
    )  # fmt: skip
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
