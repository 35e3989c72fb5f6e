"""Scopes on API keys and the audit log, over every operation of the table.

The requests are test_operations' samples (one valid request per operation), sent first by
a key that lacks each operation's scope, then once each, in table order, by a key that
holds exactly that scope.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.admin.scopes import SCOPES, grants
from treasury.errors import Forbidden, ValidationError
from treasury.operations import OPERATIONS, Operation

from . import test_operations

live = test_operations.live  # one server, organization and sample objects for this module

PAYMENTS = {"wallets", "recipients", "bank-accounts", "transfers", "transactions"}
ADMIN_ONLY = {"webhooks", "policy", "audit-events"}


def expected_scope(operation: Operation[Any]) -> str:
    """DESIGN §3 "Controls", read off the method and path (written apart from the table's
    own `scope_by_rule`)."""
    words = operation.path.replace("{chainId}", "").strip("/").split("/")
    if words[0] in ADMIN_ONLY:  # webhooks and their deliveries, policy, the audit log
        return "admin"
    if operation.method == "GET":
        return "read"
    if words[-1] in ("approve", "reject"):
        return "approve"
    if words[0] in PAYMENTS or words[-1] == "prepare":
        return "payments"
    return "admin"  # the test helpers: "admin (everything)"


def lacking(scope: str) -> list[str]:
    """Every scope that does not grant `scope` (none for ``read``: all of them do)."""
    return [held for held in SCOPES if not grants([held], scope)]


def test_each_operation_requires_the_scope_of_the_rule() -> None:
    for operation in OPERATIONS:
        wanted = None if operation.public else expected_scope(operation)
        assert operation.scope == wanted, operation.name


def test_scopes_grant_as_designed() -> None:
    assert lacking("read") == []
    assert lacking("payments") == ["read", "approve"]
    assert lacking("approve") == ["read", "payments"]
    assert lacking("admin") == ["read", "payments", "approve"]


def _key(t: Treasury, org_id: str, scopes: list[str], user: str) -> str:
    return t.admin.create_api_key(org_id, user_id=user, scopes=scopes).secret


def test_every_operation_over_http_by_scope_with_its_audit_events(live) -> None:
    t, client = live["t"], live["client"]
    (org,) = t.admin.list_organizations()
    org_id = org.id
    requests = test_operations.samples(live)
    base = str(client.base_url)
    refused: dict[str, str] = {}  # operation -> the refused request's id (reads too)
    for operation in OPERATIONS:
        if operation.public or not lacking(str(operation.scope)):
            continue
        method, path, kwargs = requests[operation.name]
        secret = _key(t, org_id, lacking(str(operation.scope)), "without")
        headers = {**kwargs.get("headers", {}), "x-api-key": secret}
        answer = httpx.request(method, base + path, **{**kwargs, "headers": headers})
        assert answer.status_code == 403, (operation.name, answer.text)
        assert answer.json() == {
            "error": "Forbidden",
            "details": {"required_scope": operation.scope},
        }
        refused[operation.name] = answer.headers["X-Request-Id"]
    answered: dict[str, tuple[str, str]] = {}  # operation -> (request id, key id)
    for operation in OPERATIONS:  # in table order, as test_operations runs them
        method, path, kwargs = requests[operation.name]
        headers = dict(kwargs.get("headers", {}))
        key = None
        if not operation.public:
            key = t.admin.create_api_key(org_id, user_id="with", scopes=[operation.scope])
            headers["x-api-key"] = key.secret
        answer = httpx.request(method, base + path, **{**kwargs, "headers": headers})
        assert answer.status_code == operation.status, (operation.name, answer.text)
        if operation.mutating:
            assert key is not None
            answered[operation.name] = (answer.headers["X-Request-Id"], key.id)

    events = _all_events(t, org_id)
    by_request: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_request.setdefault(str(event["requestId"]), []).append(event)
    mutating = {op.name: op for op in OPERATIONS if op.mutating}
    assert set(answered) == set(mutating)
    for name, (request_id, key_id) in answered.items():
        (event,) = by_request[request_id]  # once per request
        operation = mutating[name]
        assert event["operation"] == name
        assert event["actor"] == {"apiKeyId": key_id, "userId": "with"}
        assert event["objectType"] == operation.object_type
        assert event["status"] == operation.status
        assert set(event) == {
            "id",
            "at",
            "actor",
            "operation",
            "objectType",
            "objectId",
            "status",
            "requestId",
            "prevHash",
            "hash",
        }
        if operation.status == 201 or any(not p.chain for p in operation.path_params):
            assert event["objectId"], name  # a created object, or the one of the path
    by_name = {op.name: op for op in OPERATIONS}
    for name, request_id in refused.items():
        (event,) = by_request[request_id]  # every refused request, a read too
        assert (event["operation"], event["status"]) == (name, 403)
        names_object = any(not p.chain for p in by_name[name].path_params)
        assert (event["objectId"] is not None) == names_object, name  # the path's object
    assert t.verify_audit_log()[1] is None


def _all_events(t: Treasury, org_id: str) -> list[dict[str, Any]]:
    """Every event of the organization, page after page over HTTP's model."""
    org = t.for_organization(org_id)
    events, cursor = [], None
    while True:
        page = org.audit_events.list(limit=200, cursor=cursor)
        events += [event.to_json() for event in page.data]
        cursor = page.next_cursor
        if cursor is None:
            return events


def test_python_calls_are_checked_and_recorded(treasury: Treasury) -> None:
    org = treasury.admin.create_organization("Acme")
    reader = treasury.for_api_key(
        treasury.admin.create_api_key(org.id, user_id="u", scopes=["read"]).secret
    )
    assert reader.recipients.list().count == 0
    with pytest.raises(Forbidden) as refused:
        reader.recipients.create(address="0x" + "1" * 40, label="R", idempotency_key="k")
    assert refused.value.to_body() == {
        "error": "Forbidden",
        "details": {"required_scope": "payments"},
    }
    with pytest.raises(Forbidden):
        reader.audit_events.list()
    latest = treasury.for_organization(org.id).audit_events.list(limit=1).data[0]
    assert (latest.operation, latest.status, latest.object_id) == ("recipients.create", 403, None)


def test_keys_default_to_admin_and_refuse_unknown_scopes(treasury: Treasury) -> None:
    org = treasury.admin.create_organization("Acme")
    assert treasury.admin.create_api_key(org.id, user_id="u").scopes == ["admin"]
    both = treasury.admin.create_api_key(org.id, user_id="u", scopes=["approve", "payments"])
    assert both.scopes == ["payments", "approve"]
    assert [k.scopes for k in treasury.admin.list_api_keys(org.id)][-1] == ["payments", "approve"]
    with pytest.raises(ValidationError, match="'root'"):
        treasury.admin.create_api_key(org.id, user_id="u", scopes=["read", "root"])
