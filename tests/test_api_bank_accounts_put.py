"""``PUT /v1/bank-accounts/{id}`` (DESIGN §3 "Real backends"), over real HTTP against the
`http` fiat plugin and the fake provider (a real HTTP server): by the integer id and by
the uuid, the new details registered at the provider as a new external account and the
old one deactivated there, the same integer id and list uuid, idempotent replay, 404,
400 with field details, and new transfers paid to the new account."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.backends.fiat.http import HttpFiat
from treasury.client import TreasuryClient
from treasury.errors import NotFound, ValidationError
from treasury.http import create_app
from treasury.testing.fake_provider import FakeProvider, fake_provider, onboard
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, onramp

NEW = {
    "account": {"account_number": "000987654321", "routing_number": "011000015"},
    "address": {
        "street_line_1": "2 Elm St",
        "city": "Boston",
        "state": "MA",
        "postal_code": "02108",
        "country": "USA",
    },
}


@pytest.fixture
def live(new_storage_url) -> Iterator[dict[str, Any]]:
    with fake_provider() as fake:
        fiat = HttpFiat(fake.url, api_key=fake.api_key, timeout=httpx.Timeout(5.0))
        t = Treasury.open(new_storage_url("t.db"), master_key=MASTER_KEY, fiat=fiat)
        tenant = make_tenant(t)
        onboard(t, tenant.org.id, fake)
        with (
            serve(create_app(t)) as url,
            httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}) as api,
            TreasuryClient(url, api_key=tenant.secret) as client,
        ):
            yield {"t": t, "fake": fake, "api": api, "client": client, "tenant": tenant}
        t.close()


def _created(api: httpx.Client) -> dict[str, Any]:
    r = api.post("/v1/bank-accounts", json=BANK_ACCOUNT, headers={"Idempotency-Key": "create"})
    assert r.status_code == 201, r.text
    return dict(r.json())


def _provider_id(fake: FakeProvider, last4: str) -> str:
    (found,) = [a for a in fake.accounts.values() if a["last_4"] == last4 and a["active"]]
    return str(found["id"])


@pytest.mark.parametrize("by", ["integer id", "uuid"])
def test_put_registers_new_details_and_deactivates_the_old_account(
    live: dict[str, Any], by: str
) -> None:
    api, fake = live["api"], live["fake"]
    created = _created(api)
    uuid = created["providerExternalAccountId"]
    old = _provider_id(fake, "6789")
    ref = created["id"] if by == "integer id" else uuid
    assert isinstance(created["id"], int)
    r = api.put(f"/v1/bank-accounts/{ref}", json=NEW, headers={"Idempotency-Key": "put-1"})
    assert r.status_code == 200, r.text
    updated = r.json()
    new = _provider_id(fake, "4321")
    assert updated["id"] == created["id"] and updated["accountNumberLast4"] == "4321"
    assert updated["providerExternalAccountId"] == new != old
    assert updated["routingNumber"] == "011000015"
    assert updated["updatedAt"] > created["updatedAt"]
    assert fake.accounts[old]["active"] is False  # deactivated at the provider
    assert fake.accounts[new]["account"]["routing_number"] == "011000015"
    (row,) = api.get("/v1/bank-accounts").json()["data"]
    assert row["id"] == uuid and row["accountNumberLast4"] == "4321"  # the list keeps its uuid

    # the same key again: the same answer, replayed; nothing more at the provider
    again = api.put(f"/v1/bank-accounts/{ref}", json=NEW, headers={"Idempotency-Key": "put-1"})
    assert again.status_code == 200 and again.json() == updated
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert len(fake.accounts) == 2

    # a new transfer names the account by its uuid and is paid through the new account
    wallet = live["tenant"].org.wallets.create(label="Ops").address
    on = api.post(
        "/v1/transfers", json=onramp(uuid, wallet, "10"), headers={"Idempotency-Key": "on"}
    )
    assert on.status_code == 201, on.text  # the fake refuses a deactivated account
    assert len(fake.transfers) == 1


def test_put_answers_404_and_400_with_field_details(live: dict[str, Any]) -> None:
    api = live["api"]
    created = _created(api)
    missing = api.put("/v1/bank-accounts/999", json=NEW)
    assert missing.status_code == 404 and missing.json()["error"] == "Bank account not found"
    other = api.put("/v1/bank-accounts/00000000-0000-0000-0000-000000000000", json=NEW)
    assert other.status_code == 404
    bad = {**NEW, "account": {"account_number": "12", "routing_number": "123456789"}}
    r = api.put(f"/v1/bank-accounts/{created['id']}", json=bad)
    assert r.status_code == 400
    fields = {f["field"] for f in r.json()["details"]["fields"]}
    assert fields == {"account.account_number", "account.routing_number"}, r.json()
    r = api.put("/v1/bank-accounts/not-an-id", json={})
    assert r.status_code == 400
    assert {f["field"] for f in r.json()["details"]["fields"]} >= {"id", "account", "address"}


def test_the_typed_client_and_python_update_an_account(live: dict[str, Any]) -> None:
    client, org = live["client"], live["tenant"].org
    created = client.bank_accounts.create(BANK_ACCOUNT)
    updated = client.bank_accounts.update(created.id, NEW)
    assert updated.id == created.id and updated.account_number_last4 == "4321"
    again = org.bank_accounts.update(created.provider_external_account_id, NEW)
    assert again.id == created.id
    with pytest.raises(NotFound):
        client.bank_accounts.update(12345, NEW)
    with pytest.raises(ValidationError):
        org.bank_accounts.update(created.id, account=NEW["account"])


def test_put_needs_the_payments_scope(live: dict[str, Any]) -> None:
    t = live["t"]
    org_id = t.admin.list_api_keys()[0].organization_id
    key = t.admin.create_api_key(org_id, user_id="reader", scopes=["read"])
    created = _created(live["api"])
    with serve(create_app(t)) as url:
        r = httpx.put(
            f"{url}/v1/bank-accounts/{created['id']}", json=NEW, headers={"x-api-key": key.secret}
        )
    assert r.status_code == 403, r.text
