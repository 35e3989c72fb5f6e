"""The table of operations is the one place a /v1 operation is declared."""

from __future__ import annotations

import inspect
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_type_hints

import httpx
import pytest
from flask import Flask

from treasury import Treasury
from treasury._infra.models import Deleted, Resource
from treasury._records import breaks
from treasury._records.events import emit
from treasury.http import create_app, create_blueprint
from treasury.http._blueprint import flask_rule
from treasury.operations import CHAIN as CHAIN_PARAM
from treasury.operations import OPERATIONS, Operation, PathParam, routes, selected
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, address, idem, onramp, policy, py_policy

ROOT = Path(__file__).resolve().parent.parent
CHAIN = 31337


@pytest.fixture(scope="module")
def live(module_storage_url: str) -> Iterator[dict[str, Any]]:
    """One server on a devnet, an organization with a key, and what the samples need."""
    t = Treasury.open(
        module_storage_url,
        master_key=MASTER_KEY,
        allow_private_webhook_urls=True,
        chains={CHAIN: "devnet://"},
    )
    tenant = make_tenant(t)
    wallet = tenant.org.wallets.create(label="Sample")
    hook = tenant.org.webhooks.create(url="http://127.0.0.1:1/h", events=["transaction.failed"])
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}) as client,
    ):
        gone = tenant.org.wallets.create(label="Gone")
        bank = tenant.org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
        with t.storage.transaction() as tx:  # an event, so that the webhook has a delivery
            emit(
                tx,
                org_id=tenant.org.id,
                event_type="transaction.failed",
                wallet_address=None,
                data={},
                now=t.now().isoformat(),
            )
        delivery = tenant.org.webhooks.deliveries(hook.id).data[0].id
        moved = tenant.org.transfers.create(onramp(bank, wallet.address), idempotency_key="t")
        tenant.org.policy.put(
            **py_policy(approval_threshold="500")
        )  # two to decide, by another user
        creator = t.for_organization(tenant.org.id, user_id="creator").transfers
        awaiting = [creator.create(onramp(bank, wallet.address, "500")) for _ in range(2)]
        tenant.org.policy.put(**py_policy())
        t.run_once()  # the deposit detector starts: the books start with it
        t.chain(CHAIN).faucet(wallet.address, "c0", "1")
        t.run_once()  # and scans the faucet's block: reconciliation may run
        period = t.close_yield_period()  # a published period to read whole
        assert period is not None
        with t.storage.transaction() as tx:  # a break to resolve, on an address no run reads
            opened, _ = breaks.report(
                tx,
                org_id=tenant.org.id,
                kind="unexplained_outflow",
                chain_id=CHAIN,
                wallet=address().lower(),
                token="USDC",
                decimals=6,
                expected=5,
                actual=0,
                difference=-5,
                block_number=1,
                evidence=[],
                now=t.now().isoformat(),
            )
        yield {
            "client": client,
            "t": t,
            "wallet": wallet,
            "hook": hook,
            "gone": gone,
            "bank": bank,
            "transfer": moved,
            "delivery": delivery,
            "period": period.period_id,
            "awaiting": awaiting,
            "break": opened["number"],
        }
    t.close()


def samples(live: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """One valid request per operation: (method, path, request keyword arguments)."""
    wallet, hook = live["wallet"], live["hook"]
    prepare = {"token": "USDC", "amount": "1", "from": wallet.address}
    recorded = {
        "hash": "0x" + "ab" * 32,
        "type": "other",
        "from": wallet.address,
        "contract": address(),
        "token": address(),
        "amount": "1",
        "walletId": wallet.id,
    }
    bank, transfer = live["bank"], live["transfer"]
    return {
        "transfers.create": (
            "POST",
            "/v1/transfers",
            {"json": onramp(bank, wallet.address), "headers": idem()},
        ),
        "transfers.create_batch": (
            "POST",
            "/v1/transfers/batch",
            {"json": {"items": [onramp(bank, wallet.address)]}, "headers": idem()},
        ),
        "transfers.list": ("GET", "/v1/transfers?limit=10", {}),
        "transfers.export": (
            "GET",
            "/v1/transfers/export?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z",
            {},
        ),
        "transfers.get": ("GET", f"/v1/transfers/{transfer.id}", {}),
        "transfers.approve": ("POST", f"/v1/transfers/{live['awaiting'][0].id}/approve", {}),
        "transfers.reject": ("POST", f"/v1/transfers/{live['awaiting'][1].id}/reject", {}),
        "policy.get": ("GET", "/v1/policy", {}),
        "policy.put": (
            "PUT",
            "/v1/policy",
            {"json": policy(dailyLimit="1000000")},
        ),
        "virtual_account.get": ("GET", "/v1/virtual-account", {}),
        "virtual_wallet.get": ("GET", "/v1/virtual-wallet", {}),
        "wallets.create": ("POST", "/v1/wallets", {"json": {}, "headers": idem()}),
        "wallets.list": ("GET", "/v1/wallets", {}),
        "wallets.track": (
            "POST",
            "/v1/wallets/track",
            {"json": {"address": address(), "label": "T"}},
        ),
        "wallets.get": ("GET", f"/v1/wallets/{wallet.address}", {}),
        "wallets.update": (
            "PATCH",
            f"/v1/wallets/{wallet.address}",
            {"json": {"label": "Renamed"}},
        ),
        "wallets.delete": ("DELETE", f"/v1/wallets/{live['gone'].address}", {}),
        "recipients.create": (
            "POST",
            "/v1/recipients",
            {"json": {"address": address(), "label": "R"}, "headers": idem()},
        ),
        "recipients.list": ("GET", "/v1/recipients", {}),
        "recipients.update": ("PATCH", "/v1/recipients/1", {"json": {"label": "R2"}}),
        "recipients.delete": ("DELETE", "/v1/recipients/1", {}),
        "bank_accounts.create": ("POST", "/v1/bank-accounts", {"json": BANK_ACCOUNT}),
        "bank_accounts.list": ("GET", "/v1/bank-accounts", {}),
        "bank_accounts.update": (
            "PUT",
            "/v1/bank-accounts/1",
            {"json": {k: BANK_ACCOUNT[k] for k in ("account", "address")}},
        ),
        "webhooks.create": (
            "POST",
            "/v1/webhooks",
            {"json": {"url": "http://127.0.0.1:1/x", "events": ["transaction.confirmed"]}},
        ),
        "webhooks.list": ("GET", "/v1/webhooks", {}),
        "webhooks.deliveries": ("GET", f"/v1/webhooks/{hook.id}/deliveries", {}),
        "webhooks.retry_delivery": (
            "POST",
            f"/v1/webhooks/{hook.id}/deliveries/{live['delivery']}/retry",
            {},
        ),
        "webhooks.delete": ("DELETE", f"/v1/webhooks/{hook.id}", {}),
        "yield_artifacts.list": ("GET", "/v1/yield/artifacts", {"headers": {"x-api-key": ""}}),
        "yield_artifacts.get": (
            "GET",
            f"/v1/yield/artifacts?periodId={live['period']}",
            {"headers": {"x-api-key": ""}},
        ),
        "yields.claims": ("GET", f"/v1/yield/{wallet.address}?chainId={CHAIN}", {}),
        "swaps.prepare_deposit": ("POST", f"/v1/{CHAIN}/deposit/prepare", {"json": prepare}),
        "swaps.prepare_withdraw": ("POST", f"/v1/{CHAIN}/withdraw/prepare", {"json": prepare}),
        "transactions.record": ("POST", f"/v1/{CHAIN}/transactions", {"json": recorded}),
        "transactions.list": (
            "GET",
            f"/v1/{CHAIN}/transactions?limit=5&wallet={wallet.address}",
            {},
        ),
        "transactions.get": ("GET", f"/v1/{CHAIN}/transactions/0x{'ab' * 32}", {}),
        "balances.get": ("GET", f"/v1/{CHAIN}/balances/{wallet.address}", {}),
        "yields.estimate": ("GET", f"/v1/{CHAIN}/yield/estimate?address={wallet.address}", {}),
        "yields.get": ("GET", f"/v1/{CHAIN}/yield?address={wallet.address}", {}),
        "audit_events.list": ("GET", "/v1/audit-events?limit=5", {}),
        "ledger.balances": ("GET", f"/v1/wallets/{wallet.address}/ledger-balances", {}),
        "statements.get": ("GET", f"/v1/statements?wallet={wallet.address}&token=c0", {}),
        "statements.csv": (
            "GET",
            f"/v1/statements?wallet={wallet.address}&token=c0",
            {"headers": {"Accept": "text/csv"}},
        ),
        "reconciliation.run": ("POST", "/v1/reconciliation/runs", {"json": {}}),
        "reconciliation.get": ("GET", "/v1/reconciliation", {}),
        "reconciliation.breaks": ("GET", "/v1/reconciliation/breaks?status=open", {}),
        "reconciliation.resolve": (
            "POST",
            f"/v1/reconciliation/breaks/{live['break']}/resolve",
            {"json": {"note": "accepted: a sample"}},
        ),
        "test_helpers.faucet": (
            "POST",
            f"/v1/test-helpers/{CHAIN}/faucet",
            {"json": {"address": wallet.address, "token": "USDC", "amount": "2"}},
        ),
    }


def test_every_operation_answers_its_status_over_http(live):
    requests = samples(live)
    assert set(requests) == {op.name for op in OPERATIONS}, "one sample per operation"
    for op in OPERATIONS:  # in table order: transactions.record runs before .get
        method, path, kwargs = requests[op.name]
        assert method == op.method
        r = live["client"].request(method, path, **kwargs)
        assert r.status_code == op.status, (op.name, r.text)


def test_the_blueprint_serves_exactly_the_table(treasury):
    app = Flask("host")
    app.register_blueprint(create_blueprint(treasury, url_prefix="/v1"))
    served = {
        (method, rule.rule)
        for rule in app.url_map.iter_rules()
        if rule.endpoint.startswith("treasury.") and rule.endpoint != "treasury.not_found"
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }
    table = {(op.method, "/v1" + flask_rule(op)) for op in OPERATIONS}
    assert served == table | {("GET", "/v1/openapi.json")}  # and its OpenAPI document


def test_each_runs_a_python_method_answering_its_response(treasury, tenant):
    for op in OPERATIONS:
        root = treasury if op.public else tenant.org
        method = op.handler(root)
        assert get_type_hints(method)["return"] == op.response, op.name  # one answer type
        takes_key = "idempotency_key" in inspect.signature(method).parameters
        assert takes_key == (op.idempotency is not None), op.name
        if op.idempotency is not None:  # its answer says whether the key replayed it
            assert issubclass(op.response, Resource), op.name
        if op.chunks is not None:
            assert callable(op.chunks(tenant.org)), op.name
    assert len({op.name for op in OPERATIONS}) == len(OPERATIONS)


def test_path_parameters_are_declared_once_in_the_order_of_the_path():
    with pytest.raises(ValueError, match="path_params"):
        Operation("x.get", "GET", "/x/{id}", Deleted, lambda org: org.wallets.delete)
    with pytest.raises(ValueError, match="path_params"):
        swapped = (PathParam("id", int), CHAIN_PARAM)
        Operation(
            "x.get",
            "GET",
            "/{chainId}/x/{id}",
            Deleted,
            lambda o: o.wallets.delete,
            path_params=swapped,
        )


def test_a_query_parameter_selects_the_second_operation_of_a_route():
    (route,) = [ops for ops in routes() if ops[0].path == "/yield/artifacts"]
    assert [op.name for op in route] == ["yield_artifacts.list", "yield_artifacts.get"]
    assert selected(route, {}).name == "yield_artifacts.list"
    assert selected(route, {"chainId": "1"}).name == "yield_artifacts.list"
    assert selected(route, {"periodId": "2967"}).name == "yield_artifacts.get"
    assert [op.cache for op in route] == [None, "forever"]  # only one period is immutable


def test_the_accept_header_selects_the_csv_operation_of_a_route():
    (route,) = [ops for ops in routes() if ops[0].path == "/statements"]
    assert [op.name for op in route] == ["statements.get", "statements.csv"]
    assert selected(route, {}).name == "statements.get"  # no preference: JSON
    assert selected(route, {}, lambda media: media == "text/csv").name == "statements.csv"
    assert selected(route, {}, lambda media: False).name == "statements.get"


GENERATED = "treasury/client/_generated.py"


def test_no_path_string_outside_the_table_and_the_http_package():
    found = subprocess.run(
        ["git", "grep", "-n", '"/v1', "--", "treasury/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()
    # the typed client's declared methods are generated from the table (kept in step by
    # tests/test_client_typed.py): a copy written by a program, not by hand
    allowed = ("treasury/operations.py:", "treasury/http/", GENERATED + ":")
    outside = [line for line in found if not line.startswith(allowed)]
    assert outside == []
    for op in OPERATIONS:
        first = op.path.strip("/").split("/")[0]
        literal = f'"/{first}'
        users = subprocess.run(
            ["git", "grep", "-l", literal, "--", "treasury/"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        provider_api = {"treasury/backends/fiat/http.py", "treasury/testing/fake_provider.py"}
        assert set(users) - provider_api <= {"treasury/operations.py", GENERATED}, (literal, users)
