"""The webhook registry: secrets shown once, target URL rules, deletion."""

from __future__ import annotations

import base64

import pytest

from treasury import Treasury, ValidationError

from .conftest import MASTER_KEY, make_tenant
from .helpers import address, is_timestamp


def test_create_list_delete(client):
    wallet = address()
    r = client.post(
        "/v1/webhooks",
        json={
            "url": "http://127.0.0.1:9999/hook",
            "events": ["transaction.confirmed", "transaction.failed"],
            "wallets": [wallet],
        },
    )
    assert r.status_code == 201
    hook = r.json()
    assert set(hook) == {"id", "url", "events", "secret", "createdAt", "wallets", "active"}
    assert hook["active"] is True
    assert hook["secret"].startswith("whsec_")
    assert len(base64.b64decode(hook["secret"].removeprefix("whsec_"))) == 24
    assert hook["wallets"] == [wallet.lower()]
    assert is_timestamp(hook["createdAt"])
    listed = client.get("/v1/webhooks").json()
    assert listed["count"] == 1
    assert "secret" not in listed["data"][0]
    assert hook["secret"] not in client.get("/v1/webhooks").text
    assert {k: v for k, v in hook.items() if k != "secret"} == listed["data"][0]
    deleted = client.delete(f"/v1/webhooks/{hook['id']}")
    assert deleted.status_code == 200 and deleted.json() == {"deleted": True}
    assert client.get("/v1/webhooks").json() == {"data": [], "count": 0}
    assert client.delete(f"/v1/webhooks/{hook['id']}").status_code == 404


def test_wallets_default_to_all(client):
    r = client.post(
        "/v1/webhooks", json={"url": "https://example.test/h", "events": ["transaction.failed"]}
    )
    assert r.status_code == 201 and r.json()["wallets"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "http://127.0.0.1/h", "events": []}, "events"),
        ({"url": "http://127.0.0.1/h", "events": ["transfer.updated"]}, "events.0"),
        ({"url": "ftp://127.0.0.1/h", "events": ["transaction.failed"]}, "url"),
        ({"events": ["transaction.failed"]}, "url"),
        (
            {"url": "http://127.0.0.1/h", "events": ["transaction.failed"], "wallets": ["0x1"]},
            "wallets.0",
        ),
    ],
)
def test_bad_webhooks_are_400(client, body, field):
    r = client.post("/v1/webhooks", json=body)
    assert r.status_code == 400
    assert field in [f["field"] for f in r.json()["details"]["fields"]]
    assert client.get("/v1/webhooks").json()["count"] == 0


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/h",
        "http://localhost:8080/h",
        "http://10.0.0.8/h",
        "http://192.168.1.1/h",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/h",
        "http://0.0.0.0/h",
    ],
)
def test_private_targets_are_refused_by_default(new_storage_url, url):
    t = Treasury.open(new_storage_url("p.db"), master_key=MASTER_KEY)
    org = make_tenant(t).org
    with pytest.raises(ValidationError) as refused:
        org.webhooks.create(url=url, events=["transaction.confirmed"])
    assert refused.value.details["fields"][0]["field"] == "url"
    assert org.webhooks.list().count == 0
    t.close()


def test_public_ip_target_is_accepted_by_default(new_storage_url):
    t = Treasury.open(new_storage_url("p.db"), master_key=MASTER_KEY)
    org = make_tenant(t).org
    hook = org.webhooks.create(url="https://93.184.216.34/hook", events=["transaction.failed"])
    assert hook.secret.startswith("whsec_")
    t.close()
