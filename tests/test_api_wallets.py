"""Wallets through the live HTTP server, and the same operations in Python."""

from __future__ import annotations

import pytest

from treasury import Conflict, NotFound, ValidationError
from treasury.wallets.store import next_default_label

from .helpers import ADDRESS, address, idem, is_timestamp


def test_create_wallet_answers_spec_fields(client):
    r = client.post("/v1/wallets", json={"label": "Operations"}, headers=idem())
    assert r.status_code == 201
    body = r.json()
    assert set(body) == {"id", "address", "createdAt", "updatedAt", "label", "type"}
    assert isinstance(body["id"], int) and body["type"] == "managed"
    assert ADDRESS.match(body["address"])
    assert body["label"] == "Operations"
    assert is_timestamp(body["createdAt"]) and is_timestamp(body["updatedAt"])


def test_default_labels_fill_the_smallest_free_number(client):
    made = [client.post("/v1/wallets", headers=idem()).json() for _ in range(3)]
    assert [w["label"] for w in made] == ["Wallet 1", "Wallet 2", "Wallet 3"]
    client.delete(f"/v1/wallets/{made[1]['address']}").raise_for_status()
    again = client.post("/v1/wallets", json={}, headers=idem()).json()
    assert again["label"] == "Wallet 2"
    custom = client.post("/v1/wallets", json={"label": "Wallet 4"}, headers=idem()).json()
    assert custom["label"] == "Wallet 4"
    assert client.post("/v1/wallets", headers=idem()).json()["label"] == "Wallet 5"


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ([], "Wallet 1"),
        (["Wallet 2", "Wallet 3"], "Wallet 1"),
        (["Wallet 1", "Wallet 01", "wallet 2", "Wallet 2x"], "Wallet 2"),
        (["Wallet 1", "Wallet 2", "Wallet 4"], "Wallet 3"),
    ],
)
def test_next_default_label(labels, expected):
    assert next_default_label(labels) == expected


def test_list_sorts_and_orders(client):
    for label in ["b", "c", "a"]:
        client.post("/v1/wallets", json={"label": label}, headers=idem()).raise_for_status()
    default = client.get("/v1/wallets").json()
    assert default["count"] == 3 == len(default["data"])
    assert [w["label"] for w in default["data"]] == ["b", "c", "a"]
    by_label = client.get("/v1/wallets", params={"sort": "label", "order": "desc"}).json()
    assert [w["label"] for w in by_label["data"]] == ["c", "b", "a"]
    newest = client.get("/v1/wallets", params={"order": "desc"}).json()
    assert [w["label"] for w in newest["data"]] == ["a", "c", "b"]
    bad = client.get("/v1/wallets", params={"sort": "address"})
    assert bad.status_code == 400
    assert bad.json()["details"]["fields"][0]["field"] == "sort"


def test_delete_wallet(client):
    wallet = client.post("/v1/wallets", headers=idem()).json()
    r = client.delete(f"/v1/wallets/{wallet['address'].upper().replace('0X', '0x')}")
    assert r.status_code == 200 and r.json() == {"deleted": True}
    assert client.get("/v1/wallets").json()["count"] == 0
    again = client.delete(f"/v1/wallets/{wallet['address']}")
    assert again.status_code == 404 and again.json() == {"error": "Wallet not found"}


def test_deleted_wallet_keeps_its_custody_key(treasury, tenant):
    wallet = tenant.org.wallets.create(label="Keep")
    tenant.org.wallets.delete(wallet.address)
    with treasury.storage.read() as tx:
        row = tx.one("SELECT address FROM custody_keys WHERE address = ?", (wallet.address,))
    assert row == {"address": wallet.address}


def test_track_wallet(client):
    target = address()
    r = client.post("/v1/wallets/track", json={"address": target, "label": "Cold storage"})
    assert r.status_code == 201
    wallet = r.json()["wallet"]
    assert set(wallet) == {"id", "address", "label", "type", "createdAt"}
    assert isinstance(wallet["id"], int)
    assert wallet["address"] == target.lower()
    assert wallet["type"] == "tracked"
    assert is_timestamp(wallet["createdAt"])
    listed = client.get("/v1/wallets").json()["data"]
    assert [w["address"] for w in listed] == [target.lower()]
    dup = client.post("/v1/wallets/track", json={"address": target.lower(), "label": "Again"})
    assert dup.status_code == 409
    assert "Idempotency" not in dup.json()["error"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"address": "0x" + "0" * 40, "label": "Zero"}, "address"),
        ({"address": "0x1234", "label": "Short"}, "address"),
        ({"address": "1" * 42, "label": "No prefix"}, "address"),
        ({"address": "0x" + "1" * 40, "label": ""}, "label"),
        ({"address": "0x" + "1" * 40, "label": "x" * 101}, "label"),
        ({"address": "0x" + "1" * 40}, "label"),
    ],
)
def test_track_rejects_bad_input_and_writes_nothing(client, body, field):
    r = client.post("/v1/wallets/track", json=body)
    assert r.status_code == 400
    assert field in {f["field"] for f in r.json()["details"]["fields"]}
    assert client.get("/v1/wallets").json() == {"data": [], "count": 0}


@pytest.mark.parametrize("label", ["", "x" * 101])
def test_create_rejects_bad_labels_and_writes_nothing(client, treasury, label):
    r = client.post("/v1/wallets", json={"label": label}, headers=idem())
    assert r.status_code == 400
    assert r.json()["details"]["fields"][0]["field"] == "label"
    assert client.get("/v1/wallets").json()["count"] == 0
    with treasury.storage.read() as tx:
        assert tx.one("SELECT COUNT(*) AS n FROM custody_keys") == {"n": 0}
        assert tx.one("SELECT COUNT(*) AS n FROM idempotency_keys") == {"n": 0}


def test_labels_of_1_and_100_characters_are_accepted(client):
    for label in ["x", "y" * 100]:
        r = client.post("/v1/wallets", json={"label": label}, headers=idem())
        assert r.status_code == 201 and r.json()["label"] == label


def test_python_api_matches(tenant):
    wallets = tenant.org.wallets
    first = wallets.create(idempotency_key="k1")
    assert first.label == "Wallet 1"
    tracked = wallets.track(address=address(), label="Watch").wallet
    assert tracked.type == "tracked"
    listed = wallets.list(sort="label")
    assert [w.label for w in listed.data] == ["Wallet 1", "Watch"]
    assert listed.count == 2
    assert wallets.delete(first.address).deleted is True
    with pytest.raises(NotFound):
        wallets.delete(first.address)
    with pytest.raises(Conflict):
        wallets.track(address=tracked.address, label="Twice")
    with pytest.raises(ValidationError) as bad:
        wallets.create(label="")
    assert bad.value.details["fields"][0]["field"] == "label"
