"""Logs a person can read: one access line per request of the standalone app (method,
path, status, time, request id; never a key or a secret), a job line only for a pass that
did something, and a standing condition (a virtual wallet without gas, a failing chain)
written once until it changes, then once more when it ends."""

from __future__ import annotations

import logging
import re
import time

import httpx
import pytest

from treasury import Treasury
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .processes import serving
from .test_serve import ENV, fresh  # noqa: F401  (the fixture: a folder where init ran)

CHAIN = 31337
ACCESS = re.compile(r"^(GET|POST|PATCH|DELETE|PUT) (/\S*) (\d{3}) (\d+\.\d) ms ([0-9a-f]{16})$")


def test_one_access_line_per_request_without_secrets(treasury, caplog) -> None:
    caplog.set_level(logging.INFO, logger="treasury.access")
    tenant = make_tenant(treasury)
    with serve(create_app(treasury)) as url, httpx.Client(base_url=url) as api:
        keyed = {"x-api-key": tenant.secret, "Idempotency-Key": "idem-secretish"}
        made = api.post("/v1/wallets", json={"label": "Ops"}, headers=keyed)
        missing = api.get("/v1/nowhere", headers=keyed)
        refused = api.get("/v1/wallets", headers={"x-api-key": "trk_not_a_key"})
        listed = api.get("/v1/transfers?limit=1", headers=keyed)
    lines = [r.getMessage() for r in caplog.records if r.name == "treasury.access"]
    assert len(lines) == 4, lines
    parsed = [ACCESS.match(line) for line in lines]
    assert all(parsed), lines
    seen = [(m[1], m[2], int(m[3]), m[5]) for m in parsed if m]
    answers = (made, missing, refused, listed)
    assert seen == [
        ("POST", "/v1/wallets", 201, made.headers["X-Request-Id"]),
        ("GET", "/v1/nowhere", 404, missing.headers["X-Request-Id"]),
        ("GET", "/v1/wallets", 401, refused.headers["X-Request-Id"]),
        ("GET", "/v1/transfers", 200, listed.headers["X-Request-Id"]),
    ]
    assert len({a.headers["X-Request-Id"] for a in answers}) == 4
    text = caplog.text
    for secret in (tenant.secret, "trk_not_a_key", "idem-secretish", "limit=1"):
        assert secret not in text


def test_a_500_carries_the_request_id_of_its_access_line(treasury, caplog, monkeypatch) -> None:
    caplog.set_level(logging.INFO, logger="treasury")
    tenant = make_tenant(treasury)

    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(type(tenant.org.bank_accounts), "list", broken)
    with serve(create_app(treasury)) as url:
        answer = httpx.get(f"{url}/v1/bank-accounts", headers={"x-api-key": tenant.secret})
    assert answer.status_code == 500
    request_id = answer.json()["details"]["requestId"]
    assert answer.headers["X-Request-Id"] == request_id
    access = [r.getMessage() for r in caplog.records if r.name == "treasury.access"]
    assert len(access) == 1 and access[0].startswith("GET /v1/bank-accounts 500 ")
    assert access[0].endswith(f" ms {request_id}")


def test_a_wallet_without_gas_is_reported_once_until_it_changes(new_storage_url, caplog) -> None:
    caplog.set_level(logging.INFO, logger="treasury")
    with Treasury.open(new_storage_url("gas.db"), master_key=MASTER_KEY) as t:
        org = t.for_organization(t.admin.create_organization("Acme").id)
        address = org.virtual_wallet.get().address
        chain = t.chain(CHAIN)
        chain.faucet(address, "USDC", "42.5")
        for _ in range(4):  # four passes, one condition
            assert t.run_once()["virtual_wallets_without_gas"] == 1
        said = [r.getMessage() for r in caplog.records if "no ETH for gas" in r.getMessage()]
        assert said == [f"virtual wallet {address} has no ETH for gas: not swept"]
        chain.faucet(address, "ETH", "1")
        assert t.run_once()["sweeps_started"] == 1
        ended = [r.getMessage() for r in caplog.records if r.getMessage().startswith("resolved: ")]
        assert ended == [f"resolved: {said[0]}"]


def test_a_failing_chain_is_reported_once_with_its_trace(new_storage_url, caplog) -> None:
    caplog.set_level(logging.INFO, logger="treasury")
    chains = {5: {"url": "http://127.0.0.1:9", "addresses": {}}}  # nothing listens on 9
    with Treasury.open(new_storage_url("down.db"), master_key=MASTER_KEY, chains=chains) as t:
        for _ in range(3):
            assert t.run_once().errors
    failures = [r for r in caplog.records if "failed:" in r.getMessage()]
    keys = [r.getMessage().split(" failed:")[0] for r in failures]
    assert keys and len(keys) == len(set(keys))  # each failing part once, not every pass
    assert all(r.exc_info for r in failures)  # the first report keeps its trace


@pytest.mark.slow
def test_serve_logs_requests_and_only_passes_that_did_something(fresh) -> None:  # noqa: F811
    cwd, secret = fresh
    with serving(cwd, "--interval", "0.2", env=ENV) as server:
        httpx.get(f"{server.base}/wallets", headers={"x-api-key": secret})
        time.sleep(2.5)  # a dozen passes, nearly all idle
        out = server.output()
    assert re.search(r"treasury: GET /v1/wallets 200 \d+\.\d ms [0-9a-f]{16}", out), out
    assert secret not in out
    passes = [line for line in out.splitlines() if "jobs pass" in line]
    assert 1 <= len(passes) <= 2, out  # the first (a snapshot), not one every 0.2 s
    assert "errors=0" not in out


def test_a_condition_is_logged_when_it_starts_changes_and_ends(caplog) -> None:
    from treasury._infra.logs import Conditions

    caplog.set_level(logging.INFO, logger="test.conditions")
    conditions = Conditions(logging.getLogger("test.conditions"))
    for text in ("sweep: w1 has no gas", "sweep: w1 has no gas", "sweep: w1 has 1 wei of gas"):
        conditions.report("sweep: w1", text)
        conditions.settle(["sweep"])
    conditions.settle(["index"])  # a pass of other jobs only: the sweep's condition stands
    conditions.settle(["sweep"])  # a sweep pass that no longer reports it: it ended
    conditions.settle(["sweep"])
    assert [r.getMessage() for r in caplog.records] == [
        "sweep: w1 has no gas",
        "sweep: w1 has 1 wei of gas",
        "resolved: sweep: w1 has 1 wei of gas",
    ]
