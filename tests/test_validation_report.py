"""How input failures are reported: every field at once, named in Python too."""

from __future__ import annotations

import pytest

import treasury._infra.validation as validation
from treasury import NotFound, ValidationError
from treasury.wallets import Wallet

from .conftest import make_tenant
from .helpers import address


def test_every_failing_field_is_reported_together(client):
    r = client.post(
        "/v1/wallets", json={"label": "", "colour": "red"}, headers={"Idempotency-Key": ""}
    )
    assert r.status_code == 400
    fields = {(f["location"], f["field"]) for f in r.json()["details"]["fields"]}
    assert fields == {("header", "Idempotency-Key"), ("body", "label"), ("body", "colour")}


def test_path_query_and_body_fail_together(client):
    r = client.post("/v1/31337/transactions", json={"hash": "0x12"})
    body = r.json()
    assert r.status_code == 400
    assert {f["field"] for f in body["details"]["fields"]} >= {"hash", "type", "walletId"}


def test_the_string_of_a_validation_error_names_the_fields(tenant):
    with pytest.raises(ValidationError) as refused:
        tenant.org.recipients.create(address="0x12", label="", idempotency_key="k")
    text = str(refused.value)
    assert "address" in text and "label" in text and text.startswith("Invalid input (")


def test_wallets_are_listed_with_their_id_and_type(tenant):
    managed = tenant.org.wallets.create(label="Hot")
    tracked = tenant.org.wallets.track(address=address(), label="Cold").wallet
    listed = {w.address: (w.id, w.type) for w in tenant.org.wallets.list().data}
    assert listed == {managed.address: (1, "managed"), tracked.address: (2, "tracked")}


def test_get_returns_the_wallet_model_without_internal_fields(tenant):
    made = tenant.org.wallets.create(label="Hot")
    found = tenant.org.wallets.get(made.address.upper().replace("0X", "0x"))
    assert isinstance(found, Wallet) and found == made
    assert "custody_ref" not in found.to_json() and "custodyRef" not in found.to_json()


def test_ids_are_numbered_per_organization(treasury, tenant):
    other = make_tenant(treasury, "Globex")
    for org in (tenant.org, other.org, tenant.org):
        org.recipients.create(address=address(), label="x", idempotency_key=address())
    assert [r.id for r in tenant.org.recipients.list().data] == [1, 2]
    assert [r.id for r in other.org.recipients.list().data] == [1]


def test_validators_are_built_once(tenant, monkeypatch):
    built = []

    class Counting(validation.TypeAdapter):  # type: ignore[misc]
        def __init__(self, *args, **kwargs):
            built.append(args)
            super().__init__(*args, **kwargs)

    validation._adapter.cache_clear()
    monkeypatch.setattr(validation, "TypeAdapter", Counting)
    for _ in range(20):
        with pytest.raises(NotFound):  # no such wallet
            tenant.org.wallets.delete(address())
    assert len(built) == 1
