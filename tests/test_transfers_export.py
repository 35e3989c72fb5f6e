"""The CSV export of the transfers feed (DESIGN §3 Controls): the JSON feed's rows between
two times, oldest first, in the documented columns, streamed."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, idem, offramp, onramp, policy, swap

CHAIN = 31337
HEADER = (
    "id,createdAt,updatedAt,status,fromCurrency,fromAmount,fromAddress,toCurrency,toAmount,"
    "toAddress,transactionHash,clientReferenceId,failureReason"
)
START = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def live(storage_url: str) -> Iterator[dict[str, Any]]:
    """Transfers of every pairing, one a minute from START, one failed, one with a
    reference holding a comma and a quote."""
    now = [START]
    t = Treasury.open(storage_url, master_key=MASTER_KEY, clock=lambda: now[0])
    tenant = make_tenant(t)
    other = make_tenant(t, "Other")
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}, timeout=60) as api,
    ):
        wallet = api.post("/v1/wallets", json={}, headers=idem()).json()["address"]
        t.chain(CHAIN).faucet(wallet, "ETH", "1")
        t.chain(CHAIN).faucet(wallet, "USDC", "100")
        bank = api.post("/v1/bank-accounts", json=BANK_ACCOUNT).json()["providerExternalAccountId"]
        bodies = [
            onramp(bank, wallet, "10", client_reference_id='inv 7, "March"'),
            swap("deposit", wallet, wallet, "5"),
            offramp(wallet, bank, "2"),
            swap("deposit", wallet, wallet, "500"),  # refused: not in the feed
            swap("withdraw", wallet, wallet, "1"),
            onramp(bank, wallet, "3"),
        ]
        for body in bodies:
            now[0] += timedelta(minutes=1)
            api.post("/v1/transfers", json=body, headers=idem())
            t.run_once()
        api.put("/v1/policy", json=policy(approvalThreshold="40"))
        now[0] += timedelta(minutes=1)
        rejected = api.post("/v1/transfers", json=onramp(bank, wallet, "40"), headers=idem())
        approver = t.for_organization(tenant.org.id, user_id="approver")
        approver.transfers.reject(rejected.json()["id"])  # failed
        other.org.transfers.create(onramp(bank_of(other, t), wallet), idempotency_key="o")
        yield {"t": t, "api": api, "url": url, "secret": tenant.secret}
    t.close()


def bank_of(tenant: Any, t: Treasury) -> str:
    return str(tenant.org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id)


def feed(api: httpx.Client) -> list[dict[str, Any]]:
    """The whole JSON feed, oldest first."""
    rows, cursor = [], None
    while True:
        page = api.get(
            "/v1/transfers", params={"limit": 2, **({"cursor": cursor} if cursor else {})}
        ).json()
        rows += page["data"]
        cursor = page["nextCursor"]
        if cursor is None:
            return rows[::-1]


def row_of(transfer: dict[str, Any]) -> list[str]:
    """A JSON transfer as the CSV row of the documented columns (null: empty)."""
    source, destination = transfer["from"], transfer["to"]
    values = [
        transfer["id"],
        transfer["createdAt"],
        transfer["updatedAt"],
        transfer["status"],
        source["currency"],
        source["amount"],
        source["address"],
        destination["currency"],
        destination["amount"],
        destination["address"],
        transfer["transactionHash"],
        transfer["clientReferenceId"],
        transfer["failureReason"],
    ]
    return ["" if value is None else str(value) for value in values]


def export(api: httpx.Client, start: datetime, end: datetime) -> httpx.Response:
    return api.get(
        "/v1/transfers/export", params={"from": start.isoformat(), "to": end.isoformat()}
    )


def test_the_csv_matches_the_json_feed_row_for_row(live: dict[str, Any]) -> None:
    api = live["api"]
    answer = export(api, START, START + timedelta(days=1))
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/csv")
    assert answer.text.splitlines()[0] == HEADER
    rows = list(csv.reader(io.StringIO(answer.text)))
    expected = feed(api)
    assert len(expected) == 6  # the refused one never entered the feed
    assert {t["status"] for t in expected} >= {"completed", "failed", "pending"}
    assert rows[1:] == [row_of(t) for t in expected]
    assert rows[1][11] == 'inv 7, "March"'


def test_from_is_included_and_to_excluded(live: dict[str, Any]) -> None:
    api, expected = live["api"], feed(live["api"])
    second = datetime.fromisoformat(expected[1]["createdAt"].replace("Z", "+00:00"))
    fourth = datetime.fromisoformat(expected[3]["createdAt"].replace("Z", "+00:00"))
    rows = list(csv.reader(io.StringIO(export(api, second, fourth).text)))
    assert [row[0] for row in rows[1:]] == [t["id"] for t in expected[1:3]]
    empty = export(api, START - timedelta(days=2), START - timedelta(days=1))
    assert empty.status_code == 200 and empty.text.splitlines() == [HEADER]


def test_a_wrong_range_is_400_naming_each_field(live: dict[str, Any]) -> None:
    api = live["api"]
    missing = api.get("/v1/transfers/export")
    assert missing.status_code == 400
    assert {f["field"] for f in missing.json()["details"]["fields"]} == {"from", "to"}
    naive = api.get(
        "/v1/transfers/export", params={"from": "2030-01-01T00:00:00", "to": "2030-01-02T00:00:00Z"}
    )
    assert naive.status_code == 400
    backwards = export(api, START + timedelta(days=1), START)
    assert backwards.status_code == 400 and "after" in backwards.text


def test_python_and_the_typed_client_export_the_same_rows(live: dict[str, Any]) -> None:
    from treasury.client import TreasuryClient

    org = live["t"].for_api_key(live["secret"])
    rows = org.transfers.export(from_=START, to=START + timedelta(days=1))
    assert [t.id for t in rows] == [t["id"] for t in feed(live["api"])]
    with TreasuryClient(live["url"], api_key=live["secret"]) as client:
        text = client.transfers.export(
            from_=START.isoformat(), to=(START + timedelta(days=1)).isoformat()
        )
    assert text == export(live["api"], START, START + timedelta(days=1)).text


def test_a_cell_that_would_run_as_a_formula_is_neutralised(live: dict[str, Any]) -> None:
    """OWASP's CSV injection rule: a text cell starting with =, +, -, @ gets a leading
    quote, so a spreadsheet shows it instead of running it."""
    api = live["api"]
    wallet = api.get("/v1/wallets").json()["data"][0]["address"]
    bank = api.post("/v1/bank-accounts", json=BANK_ACCOUNT).json()["providerExternalAccountId"]
    formulas = ['=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1:A9)"]
    for reference in formulas:
        body = onramp(bank, wallet, "1", client_reference_id=reference)
        assert api.post("/v1/transfers", json=body, headers=idem()).status_code == 201
    answer = export(api, START, START + timedelta(days=1))
    references = [row[11] for row in csv.reader(io.StringIO(answer.text))][1:]
    assert {"'" + formula for formula in formulas} <= set(references)
    assert not set(formulas) & set(references)
    assert 'inv 7, "March"' in references  # ordinary text as it is


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("0001-01-01T00:00:00+14:00", "2030-01-01T00:00:00Z"),
        ("2030-01-01T00:00:00Z", "9999-12-31T23:59:59-14:00"),
    ],
)
def test_export_bounds_beyond_the_calendar_are_a_400(
    live: dict[str, Any], start: str, end: str
) -> None:
    answer = live["api"].get("/v1/transfers/export", params={"from": start, "to": end})
    assert answer.status_code == 400, answer.text
    assert answer.json()["details"]["fields"][0]["field"] in {"from", "to"}
    whole = {"from": "0001-01-01T00:00:00Z", "to": "9999-12-31T23:59:59Z"}
    assert live["api"].get("/v1/transfers/export", params=whole).status_code == 200
