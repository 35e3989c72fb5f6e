"""Reading and renaming wallets, editing and deleting recipients, through the HTTP server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from treasury import Treasury
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import address, idem


@pytest.fixture
def env(new_storage_url):
    """Two organizations on one server, and a clock the test moves."""
    now = [datetime(2026, 7, 1, 9, tzinfo=UTC)]
    t = Treasury.open(
        new_storage_url("e.db"), master_key=MASTER_KEY, clock=lambda: now[0], chains={}
    )
    mine, theirs = make_tenant(t, "Acme"), make_tenant(t, "Globex")
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": mine.secret}) as a,
        httpx.Client(base_url=url, headers={"x-api-key": theirs.secret}) as b,
    ):
        yield a, b, now
    t.close()


def later(now: list[datetime]) -> None:
    now[0] += timedelta(minutes=5)


def mixed_case(value: str) -> str:
    return "0x" + value[2:].upper()


@pytest.mark.parametrize("kind", ["managed", "tracked"])
def test_read_and_rename_a_wallet(env, kind):
    api, _, now = env
    if kind == "managed":
        wallet = api.post("/v1/wallets", json={"label": "Ops"}, headers=idem()).json()
    else:
        wallet = api.post("/v1/wallets/track", json={"address": address(), "label": "Cold"})
        wallet = api.get(f"/v1/wallets/{wallet.json()['wallet']['address']}").json()
    got = api.get(f"/v1/wallets/{mixed_case(wallet['address'])}")
    assert got.status_code == 200 and got.json() == wallet and got.json()["type"] == kind
    later(now)
    renamed = api.patch(f"/v1/wallets/{mixed_case(wallet['address'])}", json={"label": "Treasury"})
    assert renamed.status_code == 200
    body = renamed.json()
    assert body["label"] == "Treasury" and body["createdAt"] == wallet["createdAt"]
    assert body["updatedAt"] > wallet["updatedAt"]
    assert [w["label"] for w in api.get("/v1/wallets").json()["data"]] == ["Treasury"]
    for bad in ("", "x" * 101):
        r = api.patch(f"/v1/wallets/{wallet['address']}", json={"label": bad})
        assert r.status_code == 400 and r.json()["details"]["fields"][0]["field"] == "label"
    for bad_body in ({}, {"label": None}, {"label": "ok", "extra": 1}):
        assert api.patch(f"/v1/wallets/{wallet['address']}", json=bad_body).status_code == 400
    assert api.get(f"/v1/wallets/{wallet['address']}").json() == body  # nothing changed


def test_edit_a_recipient(env):
    api, _, now = env
    first = api.post("/v1/recipients", json={"address": address(), "label": "A"}, headers=idem())
    other = api.post("/v1/recipients", json={"address": address(), "label": "B"}, headers=idem())
    rid, original = first.json()["id"], first.json()
    later(now)
    label = api.patch(f"/v1/recipients/{rid}", json={"label": "Vendor"}).json()
    assert label["label"] == "Vendor" and label["address"] == original["address"]
    assert label["updatedAt"] > original["updatedAt"]
    new_address = address()
    moved = api.patch(f"/v1/recipients/{rid}", json={"address": new_address}).json()
    assert moved["address"] == new_address.lower() and moved["label"] == "Vendor"
    both = api.patch(f"/v1/recipients/{rid}", json={"address": address(), "label": "Both"})
    assert both.status_code == 200 and both.json()["label"] == "Both"
    taken = api.patch(f"/v1/recipients/{rid}", json={"address": other.json()["address"]})
    assert taken.status_code == 409
    assert taken.json()["error"] == "A recipient with this address already exists"
    empty = api.patch(f"/v1/recipients/{rid}", json={})
    assert empty.status_code == 400 and "address, a label" in empty.text
    listed = {r["id"]: r for r in api.get("/v1/recipients").json()["data"]}
    assert listed[rid] == both.json()  # the 409 and the 400 changed nothing


def test_delete_a_recipient_then_save_its_address_again(env):
    api, _, _ = env
    saved = api.post("/v1/recipients", json={"address": address(), "label": "A"}, headers=idem())
    rid, where = saved.json()["id"], saved.json()["address"]
    assert api.delete(f"/v1/recipients/{rid}").json() == {"deleted": True}
    assert api.get("/v1/recipients").json() == {"data": [], "count": 0}
    assert api.delete(f"/v1/recipients/{rid}").status_code == 404
    again = api.post("/v1/recipients", json={"address": where, "label": "A"}, headers=idem())
    assert again.status_code == 201 and again.json()["id"] != rid  # a number is never reused


def test_another_organizations_wallet_or_recipient_is_404_and_unchanged(env):
    api, theirs, _ = env
    wallet = theirs.post("/v1/wallets", json={"label": "Theirs"}, headers=idem()).json()
    recipient = theirs.post(
        "/v1/recipients", json={"address": address(), "label": "Theirs"}, headers=idem()
    ).json()
    attempts = [
        api.get(f"/v1/wallets/{wallet['address']}"),
        api.patch(f"/v1/wallets/{wallet['address']}", json={"label": "Mine now"}),
        api.patch(f"/v1/recipients/{recipient['id']}", json={"label": "Mine now"}),
        api.delete(f"/v1/recipients/{recipient['id']}"),
    ]
    assert [r.status_code for r in attempts] == [404] * 4
    assert theirs.get(f"/v1/wallets/{wallet['address']}").json() == wallet
    assert theirs.get("/v1/recipients").json()["data"] == [recipient]
