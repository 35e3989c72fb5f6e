"""Every refused request is recorded, 413 and 429 included, and recorded object ids are
canonical (DESIGN §3 "Controls, second round"): over real HTTP on loopback, read back as
an administrator reads them, with ``GET /v1/audit-events``.

The 413s come from both places a body is refused: `treasury serve`'s waitress (a declared
length above the limit refused before a byte is read, a chunked body cut at the limit)
and the app itself (a server that reads bodies, as gunicorn does)."""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from treasury import Settings, Treasury
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, address, idem, onramp, policy

MAX_BODY = 4096


def events(base: str, admin_secret: str) -> list[dict[str, Any]]:
    """The organization's audit events, newest first, as an administrator reads them."""
    answer = httpx.get(
        f"{base}/v1/audit-events", params={"limit": 200}, headers={"x-api-key": admin_secret}
    )
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"])


def event_of(base: str, admin_secret: str, answer: httpx.Response) -> dict[str, Any]:
    """The one event recorded for `answer` (found by its X-Request-Id)."""
    request_id = answer.headers["X-Request-Id"]
    (event,) = [e for e in events(base, admin_secret) if e["requestId"] == request_id]
    return event


# -- 429 ------------------------------------------------------------------------------------


@pytest.fixture
def limited(storage_url: str) -> Iterator[tuple[Treasury, str]]:
    t = Treasury.open(storage_url, master_key=MASTER_KEY, rate_limit="3/1 minute")
    with serve(create_app(t)) as base:
        yield t, base
    t.close()


def test_a_key_past_its_rate_limit_is_recorded_429_in_its_organizations_log(
    limited: tuple[Treasury, str],
) -> None:
    t, base = limited
    tenant = make_tenant(t, user_id="flooder")
    admin = t.admin.create_api_key(tenant.org.id, user_id="auditor")
    flooder = {"x-api-key": tenant.secret}
    answers = [
        httpx.post(
            f"{base}/v1/recipients",
            json={"address": address(), "label": "Payee"},
            headers={**flooder, **idem()},
        )
        for _ in range(4)
    ]
    assert [a.status_code for a in answers] == [201, 201, 201, 429]
    read = httpx.get(f"{base}/v1/recipients", headers=flooder)  # a read past the limit too
    assert read.status_code == 429

    refused = event_of(base, admin.secret, answers[-1])
    assert refused["operation"] == "recipients.create"
    assert refused["status"] == 429
    assert refused["actor"] == {"apiKeyId": tenant.key_id, "userId": "flooder"}
    assert refused["objectId"] is None  # nothing created, and no path names an object
    listed = event_of(base, admin.secret, read)
    assert (listed["operation"], listed["status"]) == ("recipients.list", 429)
    assert t.verify_audit_log()[1] is None


def test_a_refused_key_is_not_recorded_anywhere(limited: tuple[Treasury, str]) -> None:
    """Without a valid key there is no organization whose log could hold it: a 401 (and
    an address past its own limit) is in the access log only."""
    t, base = limited
    tenant = make_tenant(t)
    admin = t.admin.create_api_key(tenant.org.id, user_id="auditor")
    before = events(base, admin.secret)
    answer = httpx.post(
        f"{base}/v1/recipients",
        json={"address": address(), "label": "Payee"},
        headers={"x-api-key": "trk_not_a_key", **idem()},
    )
    assert answer.status_code == 401
    assert events(base, admin.secret) == before


# -- 413 ------------------------------------------------------------------------------------


@contextlib.contextmanager
def waitress(t: Treasury) -> Iterator[str]:
    """`treasury serve`'s server (waitress, hardened) on loopback, in a thread."""
    from waitress import wasyncore

    from treasury.http._server import create_server

    server = create_server(
        create_app(t),
        host="127.0.0.1",
        port=0,
        threads=2,
        connection_limit=100,
        channel_timeout=30,
        max_body_bytes=MAX_BODY,
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        server.task_dispatcher.shutdown()
        wasyncore.close_all(server._map)
        thread.join(timeout=10)


def raw(base: str, head: bytes, body: bytes = b"") -> tuple[int, dict[str, str]]:
    """Send a request as bytes (`body` after the head, if any); its status and headers."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(head)
        with contextlib.suppress(OSError):  # the server may hang up before taking it all
            s.sendall(body)
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                answer += chunk
    lines = answer.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    return int(lines[0].split()[1]), dict(line.lower().split(": ", 1) for line in lines[1:])


def _head(secret: str | None, extra: str) -> bytes:
    key = f"x-api-key: {secret}\r\n" if secret else ""
    return (
        "POST /v1/wallets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Idempotency-Key: big-{uuid.uuid4().hex}\r\n{key}{extra}\r\n"
    ).encode()


def test_a_body_the_server_refuses_unread_is_recorded_413_for_the_keys_organization(
    treasury: Treasury,
) -> None:
    tenant = make_tenant(treasury, user_id="uploader")
    admin = treasury.admin.create_api_key(tenant.org.id, user_id="auditor")
    with waitress(treasury) as base:
        before = len(events(base, admin.secret))
        declared, headers = raw(base, _head(tenant.secret, "Content-Length: 300000000\r\n"))
        assert declared == 413 and headers["connection"] == "close"
        event = event_of_id(base, admin.secret, headers["x-request-id"])
        assert (event["operation"], event["status"], event["objectId"]) == (
            "wallets.create",
            413,
            None,
        )
        assert event["actor"] == {"apiKeyId": tenant.key_id, "userId": "uploader"}

        chunk = b"x" * 1024
        flood = b"".join(b"%x\r\n%b\r\n" % (len(chunk), chunk) for _ in range(8))
        chunked, headers = raw(base, _head(tenant.secret, "Transfer-Encoding: chunked\r\n"), flood)
        assert chunked == 413
        assert event_of_id(base, admin.secret, headers["x-request-id"])["status"] == 413

        # without a valid key: still 413 (as before any key is looked at), recorded nowhere
        for secret in (None, "trk_not_a_key"):
            status, _ = raw(base, _head(secret, "Content-Length: 300000000\r\n"))
            assert status == 413
        assert len(events(base, admin.secret)) == before + 2
        assert httpx.get(f"{base}/v1/wallets", headers={"x-api-key": tenant.secret}).is_success
    assert treasury.verify_audit_log()[1] is None


def event_of_id(base: str, admin_secret: str, request_id: str) -> dict[str, Any]:
    (event,) = [e for e in events(base, admin_secret) if e["requestId"] == request_id]
    return event


def test_a_body_the_app_refuses_is_recorded_413(treasury: Treasury, base_url: str) -> None:
    """A server that reads bodies (werkzeug's here, gunicorn's in production): the app
    stops at the limit (`max_body_bytes`, 1 MiB by default) and records the 413."""
    tenant = make_tenant(treasury)
    admin = treasury.admin.create_api_key(tenant.org.id, user_id="auditor")
    answer = httpx.post(
        f"{base_url}/v1/recipients",
        content=b'{"label": "' + b"x" * (Settings().max_body_bytes + 1) + b'"}',
        headers={"x-api-key": tenant.secret, "content-type": "application/json", **idem()},
    )
    assert answer.status_code == 413
    event = event_of(base_url, admin.secret, answer)
    assert (event["operation"], event["status"]) == ("recipients.create", 413)


# -- object ids as the API answers them ----------------------------------------------------


def test_recorded_object_ids_are_canonical(treasury: Treasury, base_url: str) -> None:
    tenant = make_tenant(treasury)
    admin = treasury.admin.create_api_key(tenant.org.id, user_id="auditor")
    api = httpx.Client(base_url=base_url, headers={"x-api-key": tenant.secret})
    made = api.post(
        "/v1/recipients", json={"address": address(), "label": "Payee"}, headers=idem()
    ).json()
    padded = api.patch(f"/v1/recipients/00{made['id']}", json={"label": "Renamed"})
    assert padded.status_code == 200
    assert event_of(base_url, admin.secret, padded)["objectId"] == str(made["id"])
    missing = api.delete("/v1/recipients/000999")
    assert missing.status_code == 404
    assert event_of(base_url, admin.secret, missing)["objectId"] == "999"

    wallet = api.post("/v1/wallets", json={"label": "Ops"}, headers=idem()).json()["address"]
    upper = "0x" + wallet[2:].upper()
    renamed = api.patch(f"/v1/wallets/{upper}", json={"label": "Treasury"})
    assert renamed.status_code == 200
    assert event_of(base_url, admin.secret, renamed)["objectId"] == wallet
    unknown = "0x" + "AB" * 20
    gone = api.delete(f"/v1/wallets/{unknown}")
    assert gone.status_code == 404
    assert event_of(base_url, admin.secret, gone)["objectId"] == unknown.lower()
    read = api.get(f"/v1/wallets/{'0x' + 'CD' * 20}")  # a refused read, recorded too
    assert read.status_code == 404
    assert event_of(base_url, admin.secret, read)["objectId"] == "0x" + "cd" * 20

    # an id that is none of its kind names no object: never recorded as sent
    for path in (f"/v1/recipients/{'9' * 4_301}", "/v1/wallets/0xnothex"):
        odd = api.delete(path)
        assert odd.status_code in (400, 404)
        assert event_of(base_url, admin.secret, odd)["objectId"] is None
    api.close()


@pytest.fixture
def approvals(storage_url: str) -> Iterator[dict[str, Any]]:
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    t = Treasury.open(storage_url, master_key=MASTER_KEY, clock=lambda: now[0])
    tenant = make_tenant(t, user_id="alice")
    bob = t.admin.create_api_key(tenant.org.id, user_id="bob")
    with (
        serve(create_app(t)) as base,
        httpx.Client(base_url=base, headers={"x-api-key": tenant.secret}) as alice,
        httpx.Client(base_url=base, headers={"x-api-key": bob.secret}) as approver,
    ):
        wallet = alice.post("/v1/wallets", json={"label": "Ops"}, headers=idem()).json()
        bank = alice.post("/v1/bank-accounts", json=BANK_ACCOUNT).json()
        assert alice.put("/v1/policy", json=policy(approvalThreshold="10")).status_code == 200
        yield {
            "t": t,
            "base": base,
            "alice": alice,
            "bob": approver,
            "ramp": onramp(bank["providerExternalAccountId"], wallet["address"], "10"),
            "admin": tenant.secret,
        }
    t.close()


def test_a_refused_approval_records_its_target(approvals: dict[str, Any]) -> None:
    """403 (the creator's own user), 409 (after a rejection) and 404 (no such transfer):
    each event names the transfer the request named, as the API spells its id."""
    alice, bob, base = approvals["alice"], approvals["bob"], approvals["base"]
    created = alice.post("/v1/transfers", json=approvals["ramp"], headers=idem()).json()
    assert created["approvalStatus"] == "awaiting"
    target = created["id"]
    shouted = target.upper()

    own = alice.post(f"/v1/transfers/{shouted}/approve")
    assert own.status_code == 403
    assert bob.post(f"/v1/transfers/{target}/reject").status_code == 200
    late = bob.post(f"/v1/transfers/{shouted}/approve")
    assert late.status_code == 409
    nobody = str(uuid.uuid4())
    missing = bob.post(f"/v1/transfers/{nobody.upper()}/approve")
    assert missing.status_code == 404

    for answer, status, object_id in (
        (own, 403, target),
        (late, 409, target),
        (missing, 404, nobody),
    ):
        event = event_of(base, approvals["admin"], answer)
        assert (event["operation"], event["status"], event["objectId"]) == (
            "transfers.approve",
            status,
            object_id,
        )
    assert approvals["t"].verify_audit_log()[1] is None
