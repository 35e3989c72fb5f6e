"""Yield distributions, publication: with an injected clock on the devnet, a week of
snapshots becomes a frozen, listed period whose leaves follow the formula and whose
proofs verify with the test's own keccak code."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext

import httpx
from eth_account import Account
from hypothesis import given, settings
from hypothesis import strategies as st

from treasury import Treasury
from treasury.backends.chain.devnet import DevnetChain
from treasury.evm.abi import BALANCE_OF, calldata
from treasury.http import create_app
from treasury.testing.server import serve
from treasury.yields import project
from treasury.yields.periods import bounds, period_of
from treasury.yields.publication import build

from .conftest import MASTER_KEY, make_tenant
from .helpers import proof_root
from .test_merkle import javascript
from .test_yield_distributor import CLAIM, send

CHAIN = 31337
TUESDAY = datetime(2026, 11, 17, 9, 30, tzinfo=UTC)


def owed(balance: int, apy: Decimal, span: timedelta) -> int:
    """The formula of DESIGN §3 for one segment, written out again."""
    with localcontext() as ctx:
        ctx.prec = 50  # DESIGN §3: 50 significant digits
        years = Decimal(span.total_seconds()) / 86_400 / 365
        return math.floor(balance * ((1 + apy) ** years - 1))


def test_a_week_of_snapshots_becomes_a_frozen_listed_period(new_storage_url):
    now = [TUESDAY]
    chain = DevnetChain()
    t = Treasury.open(
        new_storage_url("publish.db"),
        master_key=MASTER_KEY,
        chains={CHAIN: chain},
        clock=lambda: now[0],
    )
    acme, globex = (make_tenant(t, name).org for name in ("Acme", "Globex"))
    holders = {
        acme.wallets.create(label="Ops").address: "1000",
        globex.wallets.create(label="Ops").address: "250.5",
        acme.wallets.track(address="0x" + "1" * 40, label="Cold").wallet.address: "3",
    }
    for address, amount in holders.items():
        chain.faucet(address, "c0", amount)
    globex.wallets.create(label="Empty")  # a holder with nothing is left out
    apy = project(0, chain.earner_rate_bps()).apy
    assert t.run_once()["yield_snapshots"] == 1  # Tuesday 09:30
    _, end = bounds(period_of(TUESDAY))
    now[0] = end + timedelta(minutes=5)  # the first pass after Monday 00:00
    summary = t.run_once()
    assert summary["yield_snapshots"] == 1 and summary["yield_periods_published"] == 1

    accounts = sorted(holders)
    one = 10**chain.c0_decimals  # a whole c0 in raw units
    expected = {a: owed(int(Decimal(holders[a]) * one), apy, end - TUESDAY) for a in accounts}
    with serve(create_app(t)) as url:
        listed = httpx.get(f"{url}/v1/yield/artifacts")  # public: no key
    assert listed.status_code == 200, listed.text
    (artifact,) = listed.json()["data"]
    assert artifact["periodId"] == str(period_of(TUESDAY)) and artifact["chainId"] == CHAIN
    assert artifact["count"] == 3 and artifact["total"] == str(sum(expected.values()))
    assert artifact["startsAt"].startswith("2026-11-16T00:00:00")
    assert artifact["endsAt"].startswith("2026-11-23T00:00:00")

    week = str(period_of(TUESDAY))
    with serve(create_app(t)) as url:
        whole = httpx.get(f"{url}/v1/yield/artifacts", params={"periodId": week})
        assert whole.status_code == 200, whole.text
        tag = whole.headers["ETag"]
        assert tag.startswith('"') and not tag.startswith("W/")  # a strong validator
        assert whole.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        again = httpx.get(
            f"{url}/v1/yield/artifacts",
            params={"periodId": week, "chainId": CHAIN},
            headers={"If-None-Match": tag},
        )
        assert again.status_code == 304 and again.content == b"" and again.headers["ETag"] == tag
        missing = httpx.get(f"{url}/v1/yield/artifacts", params={"periodId": "1"})
        assert missing.status_code == 404 and "not published" in missing.json()["error"]
        assert httpx.get(f"{url}/v1/yield/artifacts", params={"periodId": "x"}).status_code == 400
        on_chain = httpx.get(f"{url}/v1/yield/artifacts", params={"chainId": CHAIN})
        assert on_chain.json() == listed.json()  # the list, of one chain
        for chain_id, status in (("abc", 400), ("5", 404)):
            answer = httpx.get(f"{url}/v1/yield/artifacts", params={"chainId": chain_id})
            assert answer.status_code == status, answer.text
    period = whole.json()
    assert {k: period[k] for k in artifact} == artifact  # the listed fields, and more
    assert period["leafEncoding"] == ["uint256", "address", "uint256"]
    assert [leaf["account"] for leaf in period["leaves"]] == accounts  # ascending order
    for leaf in period["leaves"]:
        assert leaf["index"] == accounts.index(leaf["account"])
        assert leaf["amount"] == str(expected[leaf["account"]])
        assert (
            proof_root(leaf["index"], leaf["account"], int(leaf["amount"]), leaf["proof"])
            == period["root"]
        )
    assert period["tree"]["format"] == "standard-v1"

    for address in holders:  # balances change, more passes, another week: frozen
        chain.faucet(address, "c0", "5")
    for hours in (1, 2, 30):
        now[0] = end + timedelta(hours=hours)
        t.run_once()
    with serve(create_app(t)) as url:
        later = httpx.get(f"{url}/v1/yield/artifacts", params={"periodId": week})
    assert later.content == whole.content and later.headers["ETag"] == tag
    t.close()


def test_a_holder_claims_on_chain_and_its_claim_then_shows_claimed(new_storage_url):
    """The pass that publishes the period also posts its root and total to the devnet's
    distributor; the holder claims with the proof the API gives, receives exactly its
    amount, cannot claim twice, and the claims endpoint then says `claimed`."""
    now = [TUESDAY]
    chain = DevnetChain()
    t = Treasury.open(
        new_storage_url("claim.db"),
        master_key=MASTER_KEY,
        chains={CHAIN: chain},
        clock=lambda: now[0],
    )
    tenant = make_tenant(t, "Acme")
    holder = Account.create()  # a tracked wallet whose key its owner holds
    tenant.org.wallets.track(address=holder.address, label="Mine")
    chain.faucet(holder.address, "c0", "1000")
    chain.faucet(holder.address, "ETH", "1")
    t.run_once()
    now[0] = bounds(period_of(TUESDAY))[1] + timedelta(minutes=5)
    assert t.run_once()["yield_periods_published"] == 1
    c0, distributor = chain.addresses["c0"], chain.addresses["yield_distributor"]
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}) as api,
    ):
        (claim,) = api.get(f"/v1/yield/{holder.address}").json()["data"]  # mixed case
        assert claim["status"] == "unclaimed" and claim["distributor"] == distributor
        assert claim["chainId"] == CHAIN and claim["periodId"] == str(period_of(TUESDAY))
        amount = int(claim["amount"])
        proof = [bytes.fromhex(p[2:]) for p in claim["proof"]]
        args = (int(claim["periodId"]), claim["index"], claim["account"], amount, proof)
        before = balance(chain, c0, holder.address)
        assert send(chain, holder, distributor, calldata(CLAIM, *args))["status"] == 1
        assert balance(chain, c0, holder.address) - before == amount
        assert send(chain, holder, distributor, calldata(CLAIM, *args))["status"] == 0
        assert api.get(f"/v1/yield/{holder.address}").json()["data"][0]["status"] == "claimed"
        assert api.get(f"/v1/yield/{holder.address}", params={"chainId": 5}).status_code == 404
        assert api.get("/v1/yield/0x" + "9" * 40).json() == {"data": [], "count": 0}
    t.close()


def balance(chain: DevnetChain, token: str, address: str) -> int:
    return int(BALANCE_OF.decode(chain.call(token, BALANCE_OF.encode(address)))[0])


@settings(deadline=None, max_examples=40)
@given(
    owed=st.dictionaries(
        st.integers(min_value=1, max_value=2**160 - 1).map(lambda n: f"0x{n:040x}"),
        st.integers(min_value=1, max_value=10**30),
        min_size=1,
        max_size=60,
    )
)
def test_a_periods_leaves_sum_to_its_total_and_every_proof_verifies(owed):
    period = build(CHAIN, 2967, owed, TUESDAY)
    assert sum(int(leaf.amount) for leaf in period.leaves) == int(period.total)
    assert period.count == len(owed) == len(period.leaves)
    assert [leaf.account for leaf in period.leaves] == sorted(owed)
    assert [leaf.index for leaf in period.leaves] == list(range(len(owed)))
    for leaf in period.leaves:
        assert int(leaf.amount) == owed[leaf.account]
        assert proof_root(leaf.index, leaf.account, int(leaf.amount), leaf.proof) == period.root


def test_a_published_tree_loads_and_verifies_in_openzeppelins_package():
    owed = {f"0x{n:040x}": n * 10**15 for n in range(1, 40)}
    period = build(CHAIN, 2967, owed, TUESDAY)
    values = [[leaf.index, leaf.account, leaf.amount] for leaf in period.leaves]
    loaded = javascript(
        {"leafEncoding": period.leaf_encoding, "values": values, "load": period.tree}
    )
    assert loaded["loaded"] == {"root": period.root, "verified": [True] * len(owed)}
    assert loaded["dump"] == period.tree  # and JavaScript builds the same tree
