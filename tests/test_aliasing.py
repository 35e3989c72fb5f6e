"""Input that could alias other input: ids in non-ASCII digits, doubled and encoded
slashes, OPTIONS, control and bidi characters in free text, duplicate JSON keys."""

from __future__ import annotations

import copy
import socket
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .helpers import BANK_ACCOUNT, address, swap


def _digits(zero: int) -> dict[int, int]:
    return str.maketrans(string.digits, "".join(chr(zero + d) for d in range(10)))


FULL_WIDTH, ARABIC_INDIC, DEVANAGARI = _digits(0xFF10), _digits(0x0660), _digits(0x0966)


def raw_request(base: str, method: str, path: str, body: bytes = b"") -> tuple[int, bytes, bytes]:
    """A request with the path byte for byte as given (clients normalize it)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        s.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks)
    head_bytes, _, content = answer.partition(b"\r\n\r\n")
    return int(head_bytes.split()[1]), head_bytes.lower(), content


def _spellings(number: int) -> list[str]:
    text = str(number)
    spelled = [text.translate(table) for table in (FULL_WIDTH, ARABIC_INDIC, DEVANAGARI)]
    encoded = ["".join(f"%{b:02X}" for b in s.encode()) for s in spelled]
    return spelled + encoded


def test_ids_in_other_digits_are_404_and_delete_nothing(client):
    made = client.post(
        "/v1/recipients",
        json={"address": address(), "label": "R"},
        headers={"Idempotency-Key": "r"},
    ).json()
    hook = client.post(
        "/v1/webhooks", json={"url": "http://93.184.215.14/h", "events": ["transaction.confirmed"]}
    ).json()
    for path in (
        *(f"/v1/recipients/{s}" for s in _spellings(made["id"])),
        *(f"/v1/webhooks/{s}" for s in _spellings(hook["id"])),
    ):
        r = client.delete(path)
        assert r.status_code == 404, (path, r.text)
        assert r.json() == {"error": "No such endpoint"}
        r = client.patch(path, json={"label": "renamed"})
        assert r.status_code == 404, (path, r.text)
    assert [r["label"] for r in client.get("/v1/recipients").json()["data"]] == ["R"]
    assert client.get("/v1/webhooks").json()["count"] == 1
    for spelled in _spellings(31337):
        assert client.get(f"/v1/{spelled}/yield/estimate").status_code == 404


def test_an_ascii_id_still_reaches_its_row(client):
    made = client.post(
        "/v1/recipients",
        json={"address": address(), "label": "R"},
        headers={"Idempotency-Key": "r"},
    ).json()
    assert client.delete(f"/v1/recipients/{made['id']}").json() == {"deleted": True}


@pytest.mark.parametrize(
    "path", ["/v1%2Fwallets", "/v1%2fwallets", "/v1/wallets%2F", "/v1//wallets", "/%2Fv1/wallets"]
)
def test_encoded_slashes_are_json_404(base_url, tenant, path):
    """(Python's HTTP server, under werkzeug's, merges a leading ``//`` before any app
    sees it; ``//v1/wallets`` through ``treasury serve`` is in test_hostile_input.)"""
    status, head, content = raw_request(base_url, "GET", path)
    assert status == 404, (path, content)
    assert b"content-type: application/json" in head and b"location:" not in head
    assert content == b'{"error": "No such endpoint"}'


@pytest.mark.parametrize("path", ["/v1/wallets", "/v1/recipients/1", "/v1/openapi.json"])
def test_options_is_json_405_with_allow(client, path):
    r = client.options(path)
    assert r.status_code == 405, r.text
    assert r.headers["content-type"] == "application/json"
    allowed = r.json()["details"]["allow"]
    assert r.headers["allow"] == ", ".join(allowed) and "OPTIONS" not in allowed


# -- free text --------------------------------------------------------------------------

NOT_TEXT = ["\x00", "\u202e"]  # the others, by the property test of `plain_text` below


def _set(body: dict[str, Any], path: str, value: str) -> dict[str, Any]:
    body = copy.deepcopy(body)
    *parents, last = path.split(".")
    node = body
    for part in parents:
        node = node[part]
    node[last] = f"ab{value}cd" if last != "url" else f"http://93.184.215.14/{value}"
    return body


def _free_text_fields(client: Any) -> list[tuple[str, str, dict[str, Any], str]]:
    """(method, path, body, field) of every free-text field of every request body."""
    wallet = client.post("/v1/wallets", json={}, headers={"Idempotency-Key": "w"}).json()
    recipient = client.post(
        "/v1/recipients",
        json={"address": address(), "label": "R"},
        headers={"Idempotency-Key": "r"},
    ).json()
    transfer = swap("deposit", wallet["address"], wallet["address"], "1")
    fields = [
        ("POST", "/v1/wallets", {"label": "x"}, "label"),
        ("POST", "/v1/wallets/track", {"address": address(), "label": "x"}, "label"),
        ("PATCH", f"/v1/wallets/{wallet['address']}", {"label": "x"}, "label"),
        ("POST", "/v1/recipients", {"address": address(), "label": "x"}, "label"),
        ("PATCH", f"/v1/recipients/{recipient['id']}", {"label": "x"}, "label"),
        ("POST", "/v1/transfers", {**transfer, "client_reference_id": "x"}, "client_reference_id"),
        ("POST", "/v1/webhooks", {"url": "x", "events": ["transaction.confirmed"]}, "url"),
    ]
    for name in ("bank_name", "business_name", "account_owner_name"):
        fields.append(("POST", "/v1/bank-accounts", BANK_ACCOUNT, name))
    for name in ("street_line_1", "street_line_2", "city", "postal_code"):
        fields.append(("POST", "/v1/bank-accounts", BANK_ACCOUNT, f"address.{name}"))
    return fields


def test_control_and_bidi_characters_are_refused_in_every_free_text_field(client):
    for method, path, body, field in _free_text_fields(client):
        for char in NOT_TEXT:
            sent = _set(body, field, char)
            headers = {"Idempotency-Key": f"t-{field}-{ord(char)}"}
            r = client.request(method, path, json=sent, headers=headers)
            assert r.status_code == 400, (path, field, repr(char), r.text)
            problems = r.json()["details"]["fields"]
            assert [p["field"] for p in problems] == [field], (path, problems)
            assert f"U+{ord(char):04X}" in problems[0]["message"]
    labels = [w["label"] for w in client.get("/v1/wallets").json()["data"]]
    assert labels == ["Wallet 1"]


def test_plain_unicode_text_is_kept(client):
    for n, label in enumerate(("Café ☕", "שלום", "مرحبا", "家族👨\u200d👩\u200d👧", "a\u200cb")):
        r = client.post("/v1/wallets", json={"label": label}, headers={"Idempotency-Key": str(n)})
        assert r.status_code == 201 and r.json()["label"] == label


_REFUSED = {*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, 0x061C, 0x200E, 0x200F}
_REFUSED |= {*range(0x202A, 0x202F), *range(0x2066, 0x206A), *range(0xD800, 0xE000)}


@given(st.text(alphabet=st.characters(codec=None), max_size=30))
def test_plain_text_refuses_exactly_control_separators_surrogates_and_bidi(text):
    from treasury._infra.models import plain_text

    bad = [c for c in text if ord(c) in _REFUSED]
    if bad:
        with pytest.raises(ValueError, match=f"U\\+{ord(bad[0]):04X} at {text.index(bad[0])}"):
            plain_text(text)
    else:
        assert plain_text(text) == text


# -- duplicate keys ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (b'{"label": "a", "label": "b"}', "label"),
        (
            b'{"address": "0x' + b"1" * 40 + b'", "label": "a", "address": "0x' + b"2" * 40 + b'"}',
            "address",
        ),
        (b'{"source": {"currency": "usdc", "currency": "c0"}}', "currency"),
        (b'{"a": [{"b": 1}, {"c": {"d": 1, "d": 2}}]}', "d"),
    ],
)
def test_a_key_given_twice_at_any_depth_is_400_naming_it(client, raw, key):
    headers = {"content-type": "application/json", "Idempotency-Key": "dup"}
    for path in ("/v1/wallets", "/v1/recipients", "/v1/transfers"):
        r = client.post(path, content=raw, headers=headers)
        assert r.status_code == 400, r.text
        problem = r.json()["details"]["fields"][0]
        assert problem["field"] == key and f'"{key}" more than once' in problem["message"]
    assert client.get("/v1/wallets").json()["count"] == 0


def test_organization_names_and_user_ids_refuse_them_too(treasury):
    from treasury.errors import ValidationError

    for char in NOT_TEXT:
        with pytest.raises(ValidationError, match=f"U\\+{ord(char):04X}"):
            treasury.admin.create_organization(f"Acme{char}")
    org = treasury.admin.create_organization("Acme")
    with pytest.raises(ValidationError, match="U\\+202E"):
        treasury.admin.create_api_key(org.id, user_id="ops\u202eadmin")
    assert [o.name for o in treasury.admin.list_organizations()] == ["Acme"]
