"""Recipients through the live HTTP server and in Python."""

from __future__ import annotations

import pytest

from treasury import Conflict

from .helpers import address, idem, is_timestamp


def test_create_and_list(client):
    target = address()
    r = client.post("/v1/recipients", json={"address": target, "label": "Payroll"}, headers=idem())
    assert r.status_code == 201
    body = r.json()
    assert set(body) == {"id", "address", "label", "createdAt", "updatedAt"}
    assert isinstance(body["id"], int)
    assert body["address"] == target.lower()
    assert body["label"] == "Payroll"
    assert is_timestamp(body["createdAt"]) and is_timestamp(body["updatedAt"])
    listed = client.get("/v1/recipients").json()
    assert listed == {"data": [body], "count": 1}


def test_duplicate_address_is_409_not_the_idempotency_text(client):
    target = address()
    client.post("/v1/recipients", json={"address": target, "label": "A"}, headers=idem())
    dup = client.post(
        "/v1/recipients", json={"address": target.lower(), "label": "B"}, headers=idem()
    )
    assert dup.status_code == 409
    assert dup.json() == {"error": "A recipient with this address already exists"}
    assert client.get("/v1/recipients").json()["count"] == 1


def test_sort_and_order(client):
    for label in ["m", "z", "a"]:
        client.post(
            "/v1/recipients", json={"address": address(), "label": label}, headers=idem()
        ).raise_for_status()
    labels = lambda **q: [x["label"] for x in client.get("/v1/recipients", params=q).json()["data"]]  # noqa: E731
    assert labels() == ["m", "z", "a"]
    assert labels(order="desc") == ["a", "z", "m"]
    assert labels(sort="label") == ["a", "m", "z"]
    assert labels(sort="label", order="desc") == ["z", "m", "a"]
    assert client.get("/v1/recipients", params={"order": "up"}).status_code == 400


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"address": "0xnothex" + "0" * 34, "label": "A"}, "address"),
        ({"label": "A"}, "address"),
        ({"address": "0x" + "a" * 40, "label": ""}, "label"),
        ({"address": "0x" + "a" * 40, "label": "L" * 101}, "label"),
        ({"address": "0x" + "a" * 40, "label": 7}, "label"),
        ({"address": "0x" + "a" * 40, "label": "A", "extra": 1}, "extra"),
    ],
)
def test_bad_input_is_400_with_field_details_and_nothing_written(client, body, field):
    r = client.post("/v1/recipients", json=body, headers=idem())
    assert r.status_code == 400
    assert field in [f["field"] for f in r.json()["details"]["fields"]]
    assert client.get("/v1/recipients").json()["count"] == 0


def test_python_api(tenant):
    recipients = tenant.org.recipients
    made = recipients.create(address="0x" + "AB" * 20, label="Vendor", idempotency_key="r1")
    assert made.address == "0x" + "ab" * 20
    assert recipients.list().data == [made]
    with pytest.raises(Conflict):
        recipients.create(address="0x" + "ab" * 20, label="Again")
