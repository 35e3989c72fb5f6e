"""Controls, second round (DESIGN §3): the address book as a control, and the whole-policy
PUT. Over real HTTP on loopback against the devnet and the sandbox provider, with an
injected clock for the cooldown."""

from __future__ import annotations

from datetime import timedelta

import httpx

from . import test_controls_policy
from .helpers import address, idem, onramp, policy, swap
from .test_controls_policy import Env

env = test_controls_policy.env  # the fixture: a served treasury, Alice, Bob, a clock


def _payments(env: Env) -> httpx.Client:
    org_id = env.t.for_api_key(env.alice.headers["x-api-key"]).id
    key = env.t.admin.create_api_key(org_id, user_id="clerk", scopes=["payments"])
    return httpx.Client(base_url=env.url, headers={"x-api-key": key.secret}, timeout=60)


def _refused_as_unknown(answer: httpx.Response) -> None:
    assert answer.status_code == 400, answer.text
    (field,) = answer.json()["details"]["fields"]
    assert field["field"] == "destination.to_address"
    assert 'policy (destinations: "known")' in field["message"]


def test_under_known_destinations_the_address_book_needs_scope_admin(env: Env) -> None:
    with _payments(env) as clerk:
        saved = clerk.post(
            "/v1/recipients", json={"address": address(), "label": "A"}, headers=idem()
        ).json()
        env.policy(destinations="known", destinationCooldownHours=0)
        forbidden = {"error": "Forbidden", "details": {"required_scope": "admin"}}
        answers = [
            clerk.post("/v1/recipients", json={"address": address(), "label": "B"}, headers=idem()),
            clerk.post(
                "/v1/wallets/track", json={"address": address(), "label": "C"}, headers=idem()
            ),
            clerk.patch(f"/v1/recipients/{saved['id']}", json={"address": address()}),
            clerk.delete(f"/v1/recipients/{saved['id']}"),
        ]
        for answer in answers:
            assert answer.status_code == 403, answer.text
            assert answer.json() == forbidden
        renamed = clerk.patch(f"/v1/recipients/{saved['id']}", json={"label": "Renamed"})
        assert renamed.status_code == 200 and renamed.json()["label"] == "Renamed"
        assert [r["address"] for r in env.alice.get("/v1/recipients").json()["data"]] == [
            saved["address"]
        ]
        # the admin key may; with "any" the payments key may again
        assert (
            env.alice.post(
                "/v1/recipients", json={"address": address(), "label": "B"}, headers=idem()
            ).status_code
            == 201
        )
        env.policy(destinations="any")
        assert (
            clerk.post(
                "/v1/wallets/track", json={"address": address(), "label": "T"}, headers=idem()
            ).status_code
            == 201
        )


def test_a_new_or_repointed_destination_is_known_only_after_the_cooldown(env: Env) -> None:
    env.policy(destinations="known", destinationCooldownHours=24)
    saved = address()
    made = env.alice.post(
        "/v1/recipients", json={"address": saved, "label": "Vendor"}, headers=idem()
    ).json()
    tracked = address()
    assert (
        env.alice.post(
            "/v1/wallets/track", json={"address": tracked, "label": "T"}, headers=idem()
        ).status_code
        == 201
    )
    for to in (saved, tracked):
        _refused_as_unknown(env.create(swap("deposit", env.wallet, to, "1")))
        _refused_as_unknown(env.create(onramp(env.bank, to, "1")))
    env.now[0] += timedelta(hours=23, minutes=59)
    _refused_as_unknown(env.create(swap("withdraw", env.wallet, saved, "1")))
    env.now[0] += timedelta(minutes=1)
    for to in (saved, tracked):
        assert env.create(swap("deposit", env.wallet, to, "1")).status_code == 201
    # a label changes nothing; another address waits its own cooldown
    env.alice.patch(f"/v1/recipients/{made['id']}", json={"label": "Vendor 2"})
    assert env.create(swap("deposit", env.wallet, saved, "1")).status_code == 201
    other = address()
    env.alice.patch(f"/v1/recipients/{made['id']}", json={"address": other})
    _refused_as_unknown(env.create(swap("deposit", env.wallet, other, "1")))
    env.now[0] += timedelta(hours=24)
    assert env.create(swap("deposit", env.wallet, other, "1")).status_code == 201
    # 0: at once; the organization's own managed wallet is always known
    env.policy(destinations="known", destinationCooldownHours=0)
    fresh = address()
    env.alice.post("/v1/recipients", json={"address": fresh, "label": "Now"}, headers=idem())
    assert env.create(swap("deposit", env.wallet, fresh, "1")).status_code == 201
    assert env.create(swap("deposit", env.wallet, env.wallet, "1")).status_code == 201


def test_a_deleted_recipient_is_never_a_known_destination(env: Env) -> None:
    env.policy(destinations="known", destinationCooldownHours=0)
    gone = address()
    made = env.alice.post(
        "/v1/recipients", json={"address": gone, "label": "Old"}, headers=idem()
    ).json()
    assert env.create(swap("deposit", env.wallet, gone, "1")).status_code == 201
    assert env.alice.delete(f"/v1/recipients/{made['id']}").status_code == 200
    _refused_as_unknown(env.create(swap("deposit", env.wallet, gone, "1")))
    _refused_as_unknown(env.create(swap("withdraw", env.wallet, gone, "1")))
    _refused_as_unknown(env.create(onramp(env.bank, gone, "1")))


def test_put_policy_needs_every_field_and_an_empty_body_turns_nothing_off(env: Env) -> None:
    set_ = env.policy(dailyLimit="100", approvalThreshold="50", destinations="known")
    for body in (None, {}):
        answer = (
            env.alice.put("/v1/policy", json=body)
            if body is not None
            else env.alice.put("/v1/policy")
        )
        assert answer.status_code == 400, answer.text
        named = {f["field"] for f in answer.json()["details"]["fields"]}
        assert {"approvalThreshold", "dailyLimit", "destinations"} <= named, named
        assert {"destinationCooldownHours", "gasStation"} <= named, named
    for missing in ("approvalThreshold", "dailyLimit", "destinations", "gasStation"):
        body = {k: v for k, v in set_.items() if k != missing}
        answer = env.alice.put("/v1/policy", json=body)
        assert answer.status_code == 400, answer.text
        assert [f["field"] for f in answer.json()["details"]["fields"]] == [missing]
    assert env.alice.get("/v1/policy").json() == set_


def test_the_gas_station_is_a_managed_wallet_of_the_organization(env: Env) -> None:
    wallets = env.alice.get("/v1/wallets").json()["data"]
    managed = next(w for w in wallets if w["address"] == env.wallet)
    assert env.policy(gasStation=managed["id"])["gasStation"] == managed["id"]
    assert env.alice.get("/v1/policy").json()["gasStation"] == managed["id"]
    tracked = env.alice.post(
        "/v1/wallets/track", json={"address": address(), "label": "T"}, headers=idem()
    ).json()["wallet"]
    other = env.t.admin.create_organization("Other")
    theirs = [env.t.for_organization(other.id).wallets.create(label="W") for _ in range(4)][-1]
    assert theirs.id not in {w["id"] for w in env.alice.get("/v1/wallets").json()["data"]}
    for wrong in (tracked["id"], 999_999, theirs.id, 0, True):
        answer = env.alice.put("/v1/policy", json=policy(gasStation=wrong))
        assert answer.status_code == 400, (wrong, answer.text)
        assert [f["field"] for f in answer.json()["details"]["fields"]] == ["gasStation"]
    assert env.alice.get("/v1/policy").json()["gasStation"] == managed["id"]
    assert env.policy(gasStation=None)["gasStation"] is None
