"""The books over the API (DESIGN §3 "The books"), on the in-process devnet and real HTTP
on loopback: a wallet's ledger balances at any time (posted, pending, available),
statements as JSON and as CSV (``Accept: text/csv``), reconciliation runs and breaks,
their scopes, their errors as the JSON error body, their events allowed to webhooks,
and the journal's own rules (a group sums to zero per token; each is posted once; each
account's running sum and its rows' balances agree; its times never go back) as
properties."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import MASTER_KEY, Tenant, make_tenant
from tests.helpers import address, policy, swap
from treasury import Treasury
from treasury._records import journal
from treasury.client import TreasuryClient
from treasury.errors import NotFound, ValidationError

CHAIN = 31337


@pytest.fixture
def funded(treasury: Treasury, tenant: Tenant) -> str:
    """A managed wallet of the tenant that received 100 USDC and 1 ETH after the deposit
    detector started (the books know them), then a deposit of 10 into c0 settled."""
    wallet = tenant.org.wallets.create(label="Ops", idempotency_key="w").address
    treasury.run_once()
    dev = treasury.chain(CHAIN)
    dev.faucet(wallet, "USDC", "100")
    dev.faucet(wallet, "ETH", "1")
    treasury.run_once()
    tenant.org.transfers.create(swap("deposit", wallet, wallet, "10"), idempotency_key="d")
    treasury.run_once()
    return wallet


def by_token(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["token"]: b for b in answer["balances"] if b["chainId"] == CHAIN}


def test_ledger_balances_at_now_and_at_a_time_before(
    treasury: Treasury, tenant: Tenant, funded: str, client: httpx.Client
) -> None:
    answer = client.get(f"/v1/wallets/{funded}/ledger-balances")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["wallet"] == funded and body["at"].endswith("Z")
    assert by_token(body)["USDC"] == {
        "chainId": CHAIN,
        "token": "USDC",
        "posted": "90",
        "pending": "0",
        "available": "90",
    }
    assert by_token(body)["c0"]["posted"] == "10" and by_token(body)["USDT"]["posted"] == "0"
    long_ago = client.get(f"/v1/wallets/{funded}/ledger-balances?at=2000-01-01T00:00:00Z")
    assert {b["posted"] for b in long_ago.json()["balances"]} == {"0"}
    checked = client.get(f"/v1/wallets/{funded.upper().replace('0X', '0x')}/ledger-balances")
    assert checked.status_code == 200  # all-uppercase hex is an address too


def test_pending_is_what_unfinished_transfers_hold(
    treasury: Treasury, tenant: Tenant, funded: str
) -> None:
    tenant.org.policy.put(**{k: v for k, v in policy(approvalThreshold="20").items()})
    other = treasury.for_organization(tenant.org.id, user_id="creator").transfers
    held = other.create(swap("deposit", funded, funded, "25"))
    assert held.approval_status == "awaiting"  # reserved, nothing signed
    (usdc,) = [b for b in tenant.org.ledger.balances(funded).balances if b.token == "USDC"]
    assert (usdc.posted, usdc.pending, usdc.available) == ("90", "25", "65")
    before = held.created_at - timedelta(microseconds=1)
    (then,) = [
        b for b in tenant.org.ledger.balances(funded, at=before).balances if b.token == "USDC"
    ]
    assert then.pending == "0"  # accepted after that time


def test_ledger_balances_refuse_what_is_not_theirs(
    treasury: Treasury, tenant: Tenant, client: httpx.Client
) -> None:
    stranger = address()
    answer = client.get(f"/v1/wallets/{stranger}/ledger-balances")
    assert answer.status_code == 404 and "error" in answer.json()
    other = make_tenant(treasury, "Other")
    theirs = other.org.wallets.create(label="Theirs", idempotency_key="t").address
    assert client.get(f"/v1/wallets/{theirs}/ledger-balances").status_code == 404
    bad = client.get(f"/v1/wallets/{theirs}/ledger-balances?at=yesterday")
    assert bad.status_code == 400
    assert [f["field"] for f in bad.json()["details"]["fields"]] == ["at"]
    assert client.get("/v1/wallets/0x12/ledger-balances").status_code == 400


def test_a_statement_as_json_and_as_csv(
    treasury: Treasury, tenant: Tenant, funded: str, client: httpx.Client
) -> None:
    query = {"wallet": funded, "token": "USDC"}
    answer = client.get("/v1/statements", params=query)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert (body["opening"], body["closing"], body["token"], body["chainId"]) == (
        "0",
        "90",
        "USDC",
        CHAIN,
    )
    assert [(e["kind"], e["amount"], e["balance"]) for e in body["entries"]] == [
        ("deposit", "100", "100"),
        ("swap", "-10", "90"),
    ]
    deposit, moved = body["entries"]
    assert deposit["depositId"].startswith(f"{CHAIN}:0x") and deposit["transferId"] is None
    assert moved["transferId"] and moved["transactionHash"].startswith("0x")
    shown = client.get("/v1/statements", params=query, headers={"Accept": "text/csv"})
    assert shown.status_code == 200 and shown.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(shown.text)))
    assert rows[0] == [
        "at",
        "kind",
        "amount",
        "balance",
        "transferId",
        "depositId",
        "transactionHash",
    ]
    assert [(r[1], r[2], r[3]) for r in rows[1:]] == [
        ("opening", "", "0"),
        ("deposit", "100", "100"),
        ("swap", "-10", "90"),  # an amount's sign is a sign, not a formula
        ("closing", "", "90"),
    ]
    window = client.get(
        "/v1/statements",
        params={**query, "from": deposit["at"], "to": moved["at"]},
    ).json()
    assert (window["opening"], window["closing"]) == ("0", "100")  # `to` excluded


def test_a_statement_refuses_bad_windows_with_every_field(
    treasury: Treasury, tenant: Tenant, funded: str, client: httpx.Client
) -> None:
    missing = client.get("/v1/statements", params={"token": "DAI"})
    assert missing.status_code == 400
    assert {f["field"] for f in missing.json()["details"]["fields"]} == {"wallet", "token"}
    backwards = client.get(
        "/v1/statements",
        params={
            "wallet": funded,
            "token": "USDC",
            "from": "2030-01-01T00:00:00Z",
            "to": "2020-01-01T00:00:00Z",
        },
    )
    assert backwards.status_code == 400 and "error" in backwards.json()
    assert (
        client.get("/v1/statements", params={"wallet": address(), "token": "USDC"}).status_code
        == 404
    )
    with pytest.raises(ValidationError):
        tenant.org.statements.get(wallet=funded, token="USDC", chainId=0)
    with pytest.raises(NotFound):
        tenant.org.statements.get(wallet=funded, token="USDC", chainId=5)


def test_reconciliation_over_http_with_its_scopes(
    treasury: Treasury, tenant: Tenant, funded: str, base_url: str
) -> None:
    reader = treasury.admin.create_api_key(tenant.org.id, user_id="r", scopes=["read"])
    with httpx.Client(base_url=base_url, headers={"x-api-key": reader.secret}) as read_only:
        refused = read_only.post("/v1/reconciliation/runs", json={})
        assert refused.status_code == 403
        assert refused.json()["details"] == {"required_scope": "admin"}
        assert read_only.get("/v1/reconciliation").status_code == 200
        assert read_only.get("/v1/reconciliation/breaks").json()["data"] == []
        assert read_only.get(f"/v1/wallets/{funded}/ledger-balances").status_code == 200
    with httpx.Client(base_url=base_url, headers={"x-api-key": tenant.secret}) as admin:
        run = admin.post("/v1/reconciliation/runs", json={})
        assert run.status_code == 201, run.text
        assert run.json() | {"at": None, "id": 0} == {
            "id": 0,  # numbered in the organization: the job ran the first
            "at": None,
            "chainId": CHAIN,
            "blockNumber": run.json()["blockNumber"],
            "pairs": 3,
            "tiedOut": True,
            "pairsTiedOut": 3,
            "inFlight": 0,
            "breaksOpen": 0,
        }
        state = admin.get("/v1/reconciliation").json()
        assert state["lastRun"] == run.json() and state["open"] == []
        unknown = admin.post("/v1/reconciliation/breaks/99/resolve", json={"note": "x"})
        assert unknown.status_code == 404 and "error" in unknown.json()
        no_note = admin.post("/v1/reconciliation/breaks/1/resolve", json={})
        assert no_note.status_code == 400
        assert [f["field"] for f in no_note.json()["details"]["fields"]] == ["note"]
        assert admin.post("/v1/reconciliation/runs", json={"chainId": 5}).status_code == 404
        hook = admin.post(
            "/v1/webhooks",
            json={
                "url": "http://127.0.0.1:1/books",
                "events": ["reconciliation.break_opened", "reconciliation.break_resolved"],
            },
        )
        assert hook.status_code == 201, hook.text
    client = TreasuryClient(base_url, api_key=tenant.secret)
    with client:
        csv_text = client.statements.csv(wallet=funded, token="c0")
        assert csv_text.splitlines()[0].startswith("at,kind,amount,balance")
        assert client.statements.get(wallet=funded, token="c0").closing == "10"
        assert client.reconciliation.get().last_run.tied_out is True


def test_a_run_waits_for_the_deposit_detector(treasury: Treasury, tenant: Tenant) -> None:
    tenant.org.wallets.create(label="New", idempotency_key="n")
    from treasury.errors import Conflict

    with pytest.raises(Conflict, match="deposit detector"):
        tenant.org.reconciliation.run()


# -- the journal's rules, as properties ---------------------------------------------------


@pytest.fixture(scope="module")
def ledger(module_storage_url: str) -> Iterator[Treasury]:
    t = Treasury.open(module_storage_url, master_key=MASTER_KEY, chains={CHAIN: "devnet://"})
    yield t
    t.close()


TOKENS = st.sampled_from(list(journal.TOKENS))
START = datetime(2030, 1, 1, tzinfo=UTC)


def group(n_wallets: int) -> st.SearchStrategy[list[tuple[int, str, int]]]:
    """Postings (wallet index, or -1 for external; token; raw) and, per token, the
    external posting that balances them."""
    leg = st.tuples(
        st.integers(min_value=-1, max_value=n_wallets - 1),
        TOKENS,
        st.integers(min_value=-(10**30), max_value=10**30),
    )
    return st.lists(leg, min_size=1, max_size=5)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    groups=st.lists(
        st.tuples(group(3), st.integers(min_value=-3600, max_value=3600)), min_size=1, max_size=6
    ),
    unbalanced=st.booleans(),
    data=st.data(),
)
def test_the_journal_keeps_its_rules(
    ledger: Treasury,
    groups: list[tuple[list[tuple[int, str, int]], int]],
    unbalanced: bool,
    data: st.DataObject,
) -> None:
    t = ledger
    org = make_tenant(t, "Books").org  # each example on books of its own
    wallets = [org.wallets.create(label=f"W{i}").address for i in range(3)]
    for postings, seconds in groups:  # times that may go back (a clock is not a sequence)
        legs = [
            (journal.EXTERNAL if i < 0 else journal.wallet(wallets[i]), s, n)
            for i, s, n in postings
        ]
        totals: dict[str, int] = defaultdict(int)
        for _, token, amount in legs:
            totals[token] += amount
        if unbalanced and any(totals.values()):
            with pytest.raises(journal.Unbalanced), t.storage.transaction() as tx:
                journal.post(
                    tx,
                    org_id=org.id,
                    group_id=f"g{data.draw(st.uuids())}",
                    at=(START + timedelta(seconds=seconds)).isoformat(),
                    chain_id=CHAIN,
                    kind="correction",
                    postings=legs,
                )
            continue
        legs += [(journal.EXTERNAL, token, -total) for token, total in totals.items()]
        group_id = f"g{data.draw(st.uuids())}"
        at = (START + timedelta(seconds=seconds)).isoformat(timespec="microseconds")
        for attempt in range(2):  # the second posting of a group changes nothing
            with t.storage.transaction() as tx:
                posted = journal.post(
                    tx,
                    org_id=org.id,
                    group_id=group_id,
                    at=at,
                    chain_id=CHAIN,
                    kind="correction",
                    postings=legs,
                    block_number=7,
                )
            assert posted is (attempt == 0 and bool(journal.netted(legs)))
    with t.storage.read() as tx:
        rows = tx.query(
            "SELECT group_id, account, token, amount, balance, at FROM journal"
            " WHERE org_id = ? ORDER BY id",
            (org.id,),
        )
        sums = {
            (r["account"], r["token"]): int(r["posted"])
            for r in tx.query(
                "SELECT account, token, posted FROM journal_balances WHERE org_id = ?", (org.id,)
            )
        }
    by_group: dict[tuple[str, str], int] = defaultdict(int)
    running: dict[tuple[str, str], int] = defaultdict(int)
    last_at: dict[tuple[str, str], str] = {}
    for row in rows:
        key = (row["account"], row["token"])
        by_group[(row["group_id"], row["token"])] += int(row["amount"])
        if row["account"] == journal.EXTERNAL:
            assert row["balance"] is None  # the rest of the world keeps no running sum
            continue
        running[key] += int(row["amount"])
        assert int(row["balance"]) == running[key]  # each row: the balance after it
        assert row["at"] >= last_at.get(key, "")  # an account's times never go back
        last_at[key] = row["at"]
    assert all(total == 0 for total in by_group.values())  # every group, every token
    assert sums == dict(running)  # the running sums are the sums
    wallet = data.draw(st.sampled_from(wallets))
    token = data.draw(TOKENS)
    times = sorted({r["at"] for r in rows} | {START.isoformat(timespec="microseconds")})
    first, last = sorted(data.draw(st.lists(st.sampled_from(times), min_size=2, max_size=2)))
    if first < last:
        statement = org.statements.get(wallet=wallet, token=token, **{"from": first, "to": last})
        with localcontext(prec=120):  # exact: raw amounts up to 10^30 with 18 decimals
            total = sum((Decimal(e.amount) for e in statement.entries), Decimal(0))
            assert Decimal(statement.opening) + total == Decimal(statement.closing)
