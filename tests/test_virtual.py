"""The virtual account and the virtual wallet, through the HTTP server on the devnet."""

from __future__ import annotations

import threading

import httpx
import pytest

from treasury import Treasury
from treasury._infra.jobs import run_pass
from treasury._treasury import JOBS
from treasury.anvil import fund
from treasury.evm.abi import BALANCE_OF
from treasury.http import create_app
from treasury.money import to_raw
from treasury.testing.server import serve
from treasury.transfers import sweep

from .conftest import MASTER_KEY, make_tenant
from .helpers import is_timestamp

CHAIN = 31337
ACCOUNT_FIELDS = {
    "id": int,
    "organizationId": str,
    "userId": str,
    "providerVirtualAccountId": str,
    "providerCustomerId": str,
    "providerWalletId": str,
    "destinationCurrency": str,
    "sourceCurrency": str,
    "developerFeePercent": str,
    "active": bool,
    "createdAt": str,
    "updatedAt": str,
    "usdbBalance": str,
    "label": str,
    "depositBankName": str,
    "depositBankAddress": str,
    "depositRoutingNumber": str,
    "depositAccountNumber": str,
    "depositBeneficiaryName": str,
    "depositBeneficiaryAddress": str,
    "depositMessage": str,
}


@pytest.fixture
def env(new_storage_url):
    t = Treasury.open(new_storage_url("v.db"), master_key=MASTER_KEY)
    mine, theirs = make_tenant(t, "Acme"), make_tenant(t, "Globex")
    with serve(create_app(t)) as url:
        clients = [
            httpx.Client(base_url=url, headers={"x-api-key": x.secret}, timeout=60)
            for x in (mine, theirs)
        ]
        yield t, mine, *clients
        for client in clients:
            client.close()
    t.close()


def test_the_virtual_account_is_provisioned_once_and_per_organization(env):
    t, tenant, api, other = env
    answers: list[httpx.Response] = []
    threads = [
        threading.Thread(target=lambda: answers.append(api.get("/v1/virtual-account")))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bodies = [r.json() for r in answers]
    assert all(r.status_code == 200 for r in answers)
    first = bodies[0]
    for name, kind in ACCOUNT_FIELDS.items():
        assert type(first[name]) is kind, name
    assert first["organizationId"] == tenant.org.id and first["destinationCurrency"] == "usdb"
    assert first["sourceCurrency"] == "usd" and first["active"] is True
    assert first["usdbBalance"] == "0" and is_timestamp(first["createdAt"])
    assert len(first["depositRoutingNumber"]) == 9
    assert {b["providerVirtualAccountId"] for b in bodies} == {first["providerVirtualAccountId"]}
    assert api.get("/v1/virtual-account").json()["id"] == first["id"]  # stable afterwards
    theirs = other.get("/v1/virtual-account").json()
    assert theirs["providerVirtualAccountId"] != first["providerVirtualAccountId"]
    assert theirs["organizationId"] != first["organizationId"]
    fiat = t._runtime.fiat  # the sandbox: a deposit arrives at the account (test helper)
    fiat.deposit_to_virtual_account(first["providerVirtualAccountId"], "125.5")
    with t.storage.transaction() as tx:  # as if the short cache of the balance had passed
        tx.execute("UPDATE virtual_accounts SET balance_read_at = NULL")
    assert api.get("/v1/virtual-account").json()["usdbBalance"] == "125.5"


def test_the_virtual_wallet_sweeps_usdc_into_c0(env):
    t, _, api, other = env
    wallet = api.get("/v1/virtual-wallet").json()
    assert api.get("/v1/virtual-wallet").json() == wallet  # the same one afterwards
    assert set(wallet) == {
        "id",
        "organizationId",
        "address",
        "custodyWalletId",
        "createdAt",
        "updatedAt",
    }
    assert other.get("/v1/virtual-wallet").json()["address"] != wallet["address"]
    chain = t.chain(CHAIN)
    address = wallet["address"]

    def balance(symbol: str) -> int:
        data = chain.call(chain.addresses[symbol], BALANCE_OF.encode(address))
        return int(BALANCE_OF.decode(data)[0])

    chain.faucet(address, "USDC", "1")  # at the minimum: nothing to sweep
    assert t.run_once()["sweeps_started"] == 0
    chain.faucet(address, "USDC", "41.5")
    assert t.run_once()["virtual_wallets_without_gas"] == 1  # no ETH yet: skipped, reported
    assert api.get("/v1/transfers").json()["count"] == 0
    chain.faucet(address, "ETH", "1")
    assert t.run_once()["sweeps_started"] == 1
    t.run_once()
    feed = api.get("/v1/transfers").json()["data"]
    assert len(feed) == 1
    sweep = feed[0]
    assert sweep["status"] == "completed" and sweep["transactionHash"]
    assert (sweep["from"]["currency"], sweep["to"]["currency"]) == ("usdc", "c0")
    assert sweep["from"]["address"] == sweep["to"]["address"] == address
    assert sweep["from"]["amount"] == sweep["to"]["amount"] == "42.5"
    assert balance("USDC") == 0 and balance("c0") == to_raw("42.5", t.decimals(CHAIN, "c0"))
    assert t.run_once()["sweeps_started"] == 0  # nothing left above the minimum


def test_two_workers_sweeping_at_once_start_one_sweep(anvil_config, new_storage_url, monkeypatch):
    """Two workers (two treasuries, each with its own signing locks, on one database and
    one anvil) sweep one virtual wallet at the worst moment: both have signed their legs
    with the same nonces before either claims. The second to claim finds the first's
    sweep open and drops its legs unsent: one sweep, completed, nothing swapped twice."""
    url = new_storage_url("sweep.db")
    workers = [
        Treasury.open(url, master_key=MASTER_KEY, chains={CHAIN: anvil_config}) for _ in range(2)
    ]
    tenant = make_tenant(workers[0], "Acme")
    address = workers[0].for_organization(tenant.org.id).virtual_wallet.get().address
    fund(anvil_config["url"], anvil_config, address, "USDC", "42.5")
    fund(anvil_config["url"], anvil_config, address, "ETH", "1")
    both_signed, claim = threading.Barrier(2, timeout=30), sweep.claim_transfer

    def claim_after_both_signed(*args, **kwargs):
        write = claim(*args, **kwargs)
        both_signed.wait()  # a scheduling hook, not a mock: the real claim runs next
        return write

    monkeypatch.setattr(sweep, "claim_transfer", claim_after_both_signed, raising=True)
    summaries = []
    job = [j for j in JOBS if j.name == "sweep_virtual_wallets"]
    threads = [
        threading.Thread(target=lambda w=w: summaries.append(run_pass(w._runtime, job)))
        for w in workers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [s.errors for s in summaries] == [{}, {}]
    assert sorted(s["sweeps_started"] for s in summaries) == [0, 1]
    monkeypatch.undo()
    workers[0].run_once()
    feed = workers[0].for_organization(tenant.org.id).transfers.list().data
    assert [(x.status, x.from_.amount) for x in feed] == [("completed", "42.5")]
    for worker in workers:
        worker.close()
