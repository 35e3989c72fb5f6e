"""Bank accounts: validation of DESIGN §3, creation response, list rows."""

from __future__ import annotations

import copy
import uuid

import pytest

from treasury import ValidationError
from treasury.bank_accounts.models import aba_checksum_ok

from .helpers import BANK_ACCOUNT, is_timestamp


def with_change(path: str, value: object) -> dict:
    body = copy.deepcopy(BANK_ACCOUNT)
    *parents, last = path.split(".")
    node = body
    for part in parents:
        node = node[part]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return body


_DELETE = object()


def test_create_answers_spec_fields(client, tenant):
    r = client.post("/v1/bank-accounts", json=BANK_ACCOUNT)
    assert r.status_code == 201
    body = r.json()
    required = {
        "id": int,
        "organizationId": str,
        "userId": str,
        "bankName": str,
        "accountOwnerName": str,
        "routingNumber": str,
        "accountNumberLast4": str,
        "checkingOrSavings": str,
        "createdAt": str,
        "updatedAt": str,
    }
    for name, kind in required.items():
        assert isinstance(body[name], kind), name
    assert body["organizationId"] == tenant.org.id
    assert body["userId"] == "user_1"
    assert body["accountNumberLast4"] == "6789"
    assert body["routingNumber"] == "021000021"
    assert body["checkingOrSavings"] == "checking"
    assert body["businessName"] == "Acme Inc"
    assert body["active"] is True
    assert body["accountType"] == "us" and body["currency"] == "usd"
    assert body["accountOwnerType"] == "business"
    assert is_timestamp(body["createdAt"])
    assert "000123456789" not in r.text


def test_list_rows_use_the_uuid_that_transfers_refer_to(client):
    created = client.post("/v1/bank-accounts", json=BANK_ACCOUNT).json()
    listed = client.get("/v1/bank-accounts").json()
    assert listed["count"] == 1
    row = listed["data"][0]
    assert str(uuid.UUID(row["id"])) == row["id"]
    assert row["id"] == created["providerExternalAccountId"]
    assert row["bankName"] == BANK_ACCOUNT["bank_name"]
    assert row["accountOwnerName"] == "Jane Doe"
    assert row["accountNumberLast4"] == "6789"
    assert "000123456789" not in client.get("/v1/bank-accounts").text


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("bank_name", "B" * 257, "bank_name"),
        ("bank_name", "", "bank_name"),
        ("account.routing_number", "021000022", "account.routing_number"),
        ("account.routing_number", "12345678", "account.routing_number"),
        ("account.account_number", "12ab", "account.account_number"),
        ("account_type", "eu", "account_type"),
        ("currency", "eur", "currency"),
        ("account_owner_type", "individual", "account_owner_type"),
        ("address.state", _DELETE, "address"),
        ("address.country", "US", "address.country"),
        ("address.city", _DELETE, "address.city"),
        ("address.postal_code", "ABCDE", "address"),
        ("business_name", _DELETE, "business_name"),
    ],
)
def test_invalid_bank_accounts_are_400_and_not_written(client, path, value, field):
    r = client.post("/v1/bank-accounts", json=with_change(path, value))
    assert r.status_code == 400, r.text
    assert field in [f["field"] for f in r.json()["details"]["fields"]]
    assert client.get("/v1/bank-accounts").json() == {"data": [], "count": 0}


def test_bank_name_of_256_characters_and_foreign_address_are_accepted(client):
    body = with_change("bank_name", "B" * 256)
    body["address"] = {
        "street_line_1": "1 Rue",
        "city": "Paris",
        "postal_code": "75001",
        "country": "FRA",
    }
    assert client.post("/v1/bank-accounts", json=body).status_code == 201


@pytest.mark.parametrize(
    ("number", "ok"),
    [("021000021", True), ("011000015", True), ("121000358", True), ("021000022", False)],
)
def test_aba_checksum(number, ok):
    assert aba_checksum_ok(number) is ok


@pytest.mark.parametrize("given", [1, "1", "not-a-uuid"])
def test_a_transfer_naming_the_integer_id_is_told_which_id_to_give(client, tenant, given):
    """The creation answer's `id` is the organization's number (1); transfers take the uuid
    that the list shows as `id` (the creation's `providerExternalAccountId`): the 400 says so,
    over HTTP and in Python."""
    created = client.post("/v1/bank-accounts", json=BANK_ACCOUNT).json()
    assert created["id"] == 1
    wallet = tenant.org.wallets.create(label="Ops").address
    body = {
        "amount": "10",
        "source": {"currency": "usd", "payment_rail": "ach_push", "external_account_id": given},
        "destination": {"currency": "usdc", "payment_rail": "ethereum", "to_address": wallet},
    }
    r = client.post("/v1/transfers", json=body, headers={"Idempotency-Key": f"t-{given}"})
    assert r.status_code == 400
    (problem,) = r.json()["details"]["fields"]
    assert problem["field"] == "source.external_account_id"
    for words in ("uuid", "GET /v1/bank-accounts", "providerExternalAccountId", "integer `id`"):
        assert words in problem["message"], problem
    with pytest.raises(ValidationError, match="providerExternalAccountId"):
        tenant.org.transfers.create(body)
    body["source"]["external_account_id"] = created["providerExternalAccountId"]
    r = client.post("/v1/transfers", json=body, headers={"Idempotency-Key": f"ok-{given}"})
    assert r.status_code == 201, r.text
