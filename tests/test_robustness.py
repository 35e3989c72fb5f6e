"""Edges found in review: restarts, out-of-range numbers, misconfigured chains, odd bodies."""

from __future__ import annotations

import pytest

from treasury import Settings, Treasury, UpstreamError, ValidationError
from treasury.evm.abi import Function

from .conftest import MASTER_KEY, make_tenant
from .helpers import address, idem

TRANSFER = Function("transfer(address,uint256)", ("bool",))


def test_a_managed_wallet_keeps_sending_after_the_chain_restarts(new_storage_url):
    """The devnet forgets everything on restart; nonces come from the chain, not a stored
    counter, so the wallet is not stranded."""
    db = new_storage_url("n.db")
    for run in range(2):
        t = Treasury.open(db, master_key=MASTER_KEY, chains={31337: "devnet://"})
        org = t.for_organization(t.admin.list_organizations()[0].id) if run else make_tenant(t).org
        wallet = org.wallets.list().data[0] if run else org.wallets.create(label="Payer")
        dev = t.chain(31337)
        dev.faucet(wallet.address, "ETH", "1")
        dev.faucet(wallet.address, "USDC", "5")
        payee = address().lower()
        data = TRANSFER.encode(payee, 1_000_000)
        tx_hash = org.wallets.send_transaction(
            31337, wallet.address, to=dev.addresses["USDC"], data=data
        )
        assert dev.web3.eth.wait_for_transaction_receipt(tx_hash)["status"] == 1
        t.close()


def test_numbers_beyond_64_bits_or_uint256_are_400(client, tenant):
    r = client.delete("/v1/webhooks/99999999999999999999")
    assert r.status_code == 400 and r.json()["details"]["fields"][0]["field"] == "id"
    body = {
        "hash": "0x" + "ab" * 32,
        "type": "other",
        "from": address(),
        "contract": address(),
        "token": address(),
        "amount": "1",
        "walletId": 2**70,
    }
    r = client.post("/v1/31337/transactions", json=body)
    assert r.status_code == 400 and r.json()["details"]["fields"][0]["field"] == "walletId"
    wallet_id = tenant.org.wallets.track(address=address(), label="W").wallet.id
    r = client.post(
        "/v1/31337/transactions", json=body | {"walletId": wallet_id, "amount": str(2**256)}
    )
    assert r.status_code == 400 and r.json()["details"]["fields"][0]["field"] == "amount"
    r = client.post(
        "/v1/31337/deposit/prepare",
        json={"token": "USDC", "amount": "1" + "0" * 80, "from": address()},
    )
    assert r.status_code == 400 and r.json()["details"]["fields"][0]["field"] == "amount"


def test_a_chain_without_multicall_is_502(new_storage_url):
    t = Treasury.open(new_storage_url("m.db"), master_key=MASTER_KEY)
    dev = t.chain(31337)
    dev.addresses["multicall"] = "0x" + "12" * 20  # no contract there
    org = make_tenant(t).org
    with pytest.raises(UpstreamError, match="multicall"):
        org.balances.get(31337, address())
    t.close()


def test_a_broken_chain_does_not_stop_indexing_the_others(new_storage_url):
    chains = {31337: "devnet://", 5: {"url": "http://127.0.0.1:9", "addresses": {}}}
    t = Treasury.open(new_storage_url("b.db"), master_key=MASTER_KEY, chains=chains)
    summary = t.run_once()
    assert set(summary.errors) == {
        "index_transactions: chain 5",
        "detect_deposits: chain 5",
        "snapshot_yields: chain 5",
    }
    assert all("addresses" in message for message in summary.errors.values())
    assert summary["yield_snapshots"] == 1  # the devnet's, after chain 5 failed
    t.close()


def test_settings_repr_never_shows_the_master_key():
    settings = Settings.load({"master_key": "s3cr3t-master-key"}, env={})
    assert "s3cr3t" not in repr(settings)


def test_an_empty_wallet_filter_is_refused(tenant):
    with pytest.raises(ValidationError) as refused:
        tenant.org.webhooks.create(
            url="http://127.0.0.1:1/h", events=["transaction.failed"], wallets=[]
        )
    assert refused.value.details["fields"][0]["field"] == "wallets"


@pytest.mark.parametrize("raw", [b"null", b"[]", b'"text"', b"3"])
def test_a_body_that_is_not_an_object_is_400(client, raw):
    r = client.post(
        "/v1/wallets", content=raw, headers={"content-type": "application/json", **idem()}
    )
    assert (
        r.status_code == 400
        and r.json()["details"]["fields"][0]["message"] == "must be a JSON object"
    )
    assert client.get("/v1/wallets").json()["count"] == 0
