"""Chain endpoints end to end, through a live server, on the devnet and on anvil.

The same tests run twice: on the in-process devnet (`devnet://`) and on a real anvil node
through the JSON-RPC backend (`http://`). Callers sign with web3, as a user would.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import pytest
from eth_account import Account

from treasury import Treasury
from treasury.anvil import fund
from treasury.backends.chain.base import Chain
from treasury.evm.abi import APPROVE, BALANCE_OF, DECIMALS, Function
from treasury.http import create_app
from treasury.money import to_raw
from treasury.testing.server import serve
from treasury.yields import project

from .conftest import MASTER_KEY, Tenant, make_tenant
from .helpers import address, is_timestamp

CHAIN = 31337
TRANSFER = Function("transfer(address,uint256)", ("bool",))


@dataclass
class Env:
    t: Treasury
    chain: Chain
    tenant: Tenant
    client: httpx.Client
    fund: Any  # fund(address, symbol, amount)

    @property
    def w3(self) -> Any:
        return self.chain.web3

    def balance(self, symbol: str, owner: str) -> int:
        token = self.chain.addresses[symbol]
        return int(BALANCE_OF.decode(self.chain.call(token, BALANCE_OF.encode(owner)))[0])

    def decimals(self, symbol: str) -> int:
        """What the chain's token `symbol` answers to ``decimals()`` (asked directly)."""
        token = self.chain.addresses[symbol]
        return int(DECIMALS.decode(self.chain.call(token, DECIMALS.encode()))[0])

    def raw(self, symbol: str, amount: str) -> int:
        """`amount` whole units of `symbol` in raw units, at the token's decimals."""
        return to_raw(amount, self.decimals(symbol))

    def sign_and_send(self, account: Any, tx: dict[str, Any], gas: int | None = None) -> dict:
        """Sign a prepared step with web3 and wait for its receipt."""
        w3 = self.w3
        full = {
            "to": w3.to_checksum_address(tx["to"]),
            "data": tx["data"],
            "value": int(tx["value"]),
            "chainId": CHAIN,
            "nonce": w3.eth.get_transaction_count(account.address, "pending"),
            "maxFeePerGas": 10**10,
            "maxPriorityFeePerGas": 10**9,
        }
        full["gas"] = gas or w3.eth.estimate_gas({**full, "from": account.address})
        signed = w3.eth.account.sign_transaction(full, account.key)
        tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
        return dict(w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30))


@pytest.fixture(params=["devnet", "anvil"])
def env(request, new_storage_url) -> Iterator[Env]:
    if request.param == "devnet":
        chains: dict[int, Any] = {CHAIN: "devnet://"}
    else:
        chains = {CHAIN: request.getfixturevalue("anvil_config")}
    t = Treasury.open(new_storage_url("c.db"), master_key=MASTER_KEY, chains=chains)
    chain = t.chain(CHAIN)
    if request.param == "devnet":
        give = chain.faucet
    else:
        config = chains[CHAIN]
        give = lambda to, symbol, amount: fund(config["url"], config, to, symbol, amount)  # noqa: E731
    tenant = make_tenant(t)
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}) as client,
    ):
        yield Env(t, chain, tenant, client, give)
    t.close()


def funded_account(env: Env, **tokens: str) -> Any:
    account = Account.create()
    env.fund(account.address, "ETH", "1")
    for symbol, amount in tokens.items():
        env.fund(account.address, symbol, amount)
    return account


def test_deposit_then_withdraw_usdc_round_trip(env: Env):
    account = funded_account(env, USDC="100")
    owner = account.address.lower()
    r = env.client.post(
        f"/v1/{CHAIN}/deposit/prepare", json={"token": "USDC", "amount": "25.5", "from": owner}
    )
    assert r.status_code == 200, r.text
    prepared = r.json()
    assert [s["type"] for s in prepared["steps"]] == ["approval", "swap"]
    assert prepared["summary"] == {
        "tokenIn": env.chain.addresses["USDC"],
        "tokenOut": env.chain.addresses["c0"],
        "amountIn": "25.5",
        "amountInRaw": "25500000",
    }
    for step in prepared["steps"]:
        assert isinstance(step["description"], str) and step["description"]
        assert set(step["transaction"]) == {"to", "data", "value"}
        assert env.sign_and_send(account, step["transaction"])["status"] == 1
    assert env.balance("c0", owner) == env.raw("c0", "25.5")
    assert env.balance("USDC", owner) == 74_500_000

    r = env.client.post(
        f"/v1/{CHAIN}/withdraw/prepare", json={"token": "USDC", "amount": "25.5", "from": owner}
    )
    withdraw = r.json()
    assert [s["type"] for s in withdraw["steps"]] == ["approval", "swap"]
    assert withdraw["summary"]["amountInRaw"] == str(env.raw("c0", "25.5"))
    for step in withdraw["steps"]:
        assert env.sign_and_send(account, step["transaction"])["status"] == 1
    assert env.balance("c0", owner) == 0
    assert env.balance("USDC", owner) == 100_000_000


def test_usdt_with_a_small_allowance_needs_a_reset_first(env: Env):
    account = funded_account(env, USDT="50")
    owner = account.address.lower()
    facility = env.chain.addresses["swap_facility"]
    small = {
        "to": env.chain.addresses["USDT"],
        "data": "0x" + APPROVE.encode(facility, 1_000_000).hex(),
        "value": "0",
    }
    env.sign_and_send(account, small)
    r = env.client.post(
        f"/v1/{CHAIN}/deposit/prepare", json={"token": "USDT", "amount": "10", "from": owner}
    )
    steps = r.json()["steps"]
    assert [s["type"] for s in steps] == ["reset-approval", "approval", "swap"]
    assert "from 1 USDT to 0" in steps[0]["description"]  # token units, not 1000000
    for step in steps:
        assert env.sign_and_send(account, step["transaction"])["status"] == 1
    assert env.balance("c0", owner) == env.raw("c0", "10")
    assert env.balance("USDT", owner) == 40 * 10**6


def test_enough_allowance_means_only_a_swap_and_recipient_gets_the_c0(env: Env):
    account = funded_account(env, USDC="10")
    owner, recipient = account.address.lower(), address().lower()
    facility = env.chain.addresses["swap_facility"]
    big = {
        "to": env.chain.addresses["USDC"],
        "data": "0x" + APPROVE.encode(facility, 10**12).hex(),
        "value": "0",
    }
    env.sign_and_send(account, big)
    body = {"token": "USDC", "amount": "2", "from": owner, "recipient": recipient}
    steps = env.client.post(f"/v1/{CHAIN}/deposit/prepare", json=body).json()["steps"]
    assert [s["type"] for s in steps] == ["swap"]
    env.sign_and_send(account, steps[0]["transaction"])
    assert env.balance("c0", recipient) == env.raw("c0", "2")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"token": "DAI", "amount": "1", "from": "0x" + "1" * 40}, "token"),
        ({"token": "USDC", "amount": "0", "from": "0x" + "1" * 40}, "amount"),
        ({"token": "USDC", "amount": "1.0000001", "from": "0x" + "1" * 40}, "amount"),
        ({"token": "USDC", "amount": "-1", "from": "0x" + "1" * 40}, "amount"),
        ({"token": "USDC", "amount": "1e3", "from": "0x" + "1" * 40}, "amount"),
        ({"token": "USDC", "amount": "1", "from": "0x12"}, "from"),
        ({"token": "USDC", "amount": "1"}, "from"),
    ],
)
def test_prepare_rejects_bad_input(env: Env, body, field):
    r = env.client.post(f"/v1/{CHAIN}/withdraw/prepare", json=body)
    assert r.status_code == 400
    assert field in [f["field"] for f in r.json()["details"]["fields"]]


def test_transaction_is_pending_then_confirmed_by_the_indexer(env: Env):
    account = funded_account(env, USDC="5")
    owner = account.address.lower()
    wallet = env.client.post("/v1/wallets/track", json={"address": owner, "label": "Hot"}).json()[
        "wallet"
    ]
    transfer = {
        "to": env.chain.addresses["USDC"],
        "data": "0x" + TRANSFER.encode(address(), 1_000_000).hex(),
        "value": "0",
    }
    receipt = env.sign_and_send(account, transfer)
    tx_hash = "0x" + bytes(receipt["transactionHash"]).hex()
    body = {
        "hash": tx_hash.upper().replace("0X", "0x"),
        "type": "other",
        "from": owner,
        "contract": env.chain.addresses["USDC"],
        "token": env.chain.addresses["USDC"],
        "amount": "1000000",
        "walletId": wallet["id"],
    }
    r = env.client.post(f"/v1/{CHAIN}/transactions", json=body)
    assert r.status_code == 201
    assert r.json() == {"hash": tx_hash, "chainId": CHAIN, "status": "pending"}
    assert env.client.post(f"/v1/{CHAIN}/transactions", json=body).status_code == 409

    pending = env.client.get(f"/v1/{CHAIN}/transactions/{tx_hash}").json()
    assert pending["status"] == "pending" and pending["receipt"] is None
    assert pending["walletId"] == wallet["id"] and pending["organizationId"] == env.tenant.org.id
    assert pending["from"] == owner and pending["amount"] == "1000000"

    summary = env.t.run_once()
    assert summary["transactions_confirmed"] == 1 and not summary.errors
    done = env.client.get(f"/v1/{CHAIN}/transactions/{tx_hash}").json()
    assert done["status"] == "confirmed"
    rc = done["receipt"]
    types = {
        "chainId": int,
        "hash": str,
        "from": str,
        "to": str,
        "transactionIndex": int,
        "blockHash": str,
        "blockNumber": int,
        "type": int,
        "contractAddress": str,
        "status": int,
        "root": str,
        "createdAt": str,
        "updatedAt": str,
    }
    for name, kind in types.items():
        assert type(rc[name]) is kind, name
    assert rc["status"] == 1 and rc["hash"] == tx_hash and rc["chainId"] == CHAIN
    assert rc["from"] == owner and rc["to"] == env.chain.addresses["USDC"]
    assert rc["blockNumber"] == receipt["blockNumber"] and rc["type"] == 2
    assert is_timestamp(rc["createdAt"]) and is_timestamp(done["updatedAt"])

    with env.t.storage.read() as tx:
        events = tx.query("SELECT org_id, type, wallet_address, payload FROM events")
    assert [(e["org_id"], e["type"], e["wallet_address"]) for e in events] == [
        (env.tenant.org.id, "transaction.confirmed", owner)
    ]
    assert env.t.run_once()["transactions_confirmed"] == 0  # nothing is indexed twice


def test_a_reverted_transaction_is_failed(env: Env):
    account = funded_account(env, USDT="5")
    owner = account.address.lower()
    wallet_id = env.tenant.org.wallets.track(address=owner, label="W").wallet.id
    usdt, facility = env.chain.addresses["USDT"], env.chain.addresses["swap_facility"]
    approve = lambda n: {"to": usdt, "data": "0x" + APPROVE.encode(facility, n).hex(), "value": "0"}  # noqa: E731
    env.sign_and_send(account, approve(1))
    receipt = env.sign_and_send(
        account, approve(2), gas=100_000
    )  # USDT refuses non-zero → non-zero
    assert receipt["status"] == 0
    tx_hash = "0x" + bytes(receipt["transactionHash"]).hex()
    env.tenant.org.transactions.record(
        CHAIN,
        {
            "hash": tx_hash,
            "type": "approval",
            "from": owner,
            "contract": usdt,
            "token": usdt,
            "amount": "2",
            "walletId": wallet_id,
        },
    )
    env.t.run_once()
    failed = env.client.get(f"/v1/{CHAIN}/transactions/{tx_hash}").json()
    assert failed["status"] == "failed" and failed["receipt"]["status"] == 0


def test_transaction_errors(env: Env):
    other = make_tenant(env.t, "Globex")
    theirs = other.org.wallets.track(address=address(), label="Theirs").wallet.id
    base = {
        "hash": "0x" + "ab" * 32,
        "type": "deposit",
        "from": address(),
        "contract": address(),
        "token": address(),
        "amount": "1",
        "walletId": theirs,
    }
    r = env.client.post(f"/v1/{CHAIN}/transactions", json=base)
    assert r.status_code == 404 and r.json() == {"error": "Wallet not found"}
    mine = env.tenant.org.wallets.track(address=address(), label="Mine").wallet.id
    for change, field in [
        ({"hash": "0x1234"}, "hash"),
        ({"from": "0xnothex"}, "from"),
        ({"contract": "0x" + "1" * 39}, "contract"),
        ({"amount": "1.5"}, "amount"),
        ({"type": "swap"}, "type"),
    ]:
        r = env.client.post(f"/v1/{CHAIN}/transactions", json=base | {"walletId": mine} | change)
        assert r.status_code == 400, change
        assert field in [f["field"] for f in r.json()["details"]["fields"]]
    assert env.client.get(f"/v1/{CHAIN}/transactions/0x1234").status_code == 400
    assert env.client.get(f"/v1/{CHAIN}/transactions/0x{'cd' * 32}").status_code == 404
    assert env.client.get(f"/v1/{CHAIN}/balances/0xZZ").status_code == 400
    for method, path in [
        ("GET", f"/v1/5/balances/{address()}"),
        ("GET", "/v1/5/transactions/0x" + "ab" * 32),
        ("POST", "/v1/5/transactions"),
        ("POST", "/v1/5/deposit/prepare"),
        ("GET", f"/v1/5/yield/estimate?address={address()}"),
    ]:
        r = env.client.request(method, path, json=base if method == "POST" else None)
        assert r.status_code == 404, path
        assert r.json() == {"error": "Chain 5 is not supported"}


def test_balances_and_yield(env: Env):
    owner = address().lower()
    env.fund(owner, "USDC", "250.5")
    env.fund(owner, "c0", "1000")
    env.fund(owner, "ETH", "0.25")
    r = env.client.get(f"/v1/{CHAIN}/balances/{owner}")
    assert r.status_code == 200
    body = r.json()
    assert body["count"] == len(body["data"]) == 4
    by_symbol = {item["symbol"]: item for item in body["data"]}
    assert set(by_symbol) == {"USDC", "USDT", "c0", "ETH"}
    assert by_symbol["ETH"] == {  # the gas coin, last, at the native-asset address of EIP-7528
        "token": "0x" + "e" * 40,
        "name": "Ether",
        "symbol": "ETH",
        "raw": str(25 * 10**16),
        "decimals": 18,
    }
    assert body["data"][-1]["symbol"] == "ETH"
    assert by_symbol["USDC"] == {
        "token": env.chain.addresses["USDC"],
        "name": by_symbol["USDC"]["name"],
        "symbol": "USDC",
        "raw": "250500000",
        "decimals": 6,
    }
    c0, places = env.raw("c0", "1000"), env.decimals("c0")
    assert by_symbol["c0"]["raw"] == str(c0) and by_symbol["c0"]["decimals"] == places
    assert by_symbol["USDT"]["raw"] == "0"

    rate = env.chain.earner_rate_bps() if hasattr(env.chain, "earner_rate_bps") else 415
    expected = project(c0, rate)
    for path in (f"/v1/{CHAIN}/yield/estimate", f"/v1/{CHAIN}/yield"):
        y = env.client.get(path, params={"address": owner}).json()
        assert y == {
            "earning": str(c0),
            "decimals": places,
            "rate": {"apy": float(expected.apy)},
            "dailyYield": str(expected.daily),
            "monthlyYield": str(expected.monthly),
            "annualYield": str(expected.annual),
        }
    assert Decimal(y["annualYield"]) > 0
    missing = env.client.get(f"/v1/{CHAIN}/yield/estimate")
    assert missing.status_code == 400
    assert missing.json()["details"]["fields"][0]["field"] == "address"


def test_managed_wallets_send_concurrently_with_consecutive_nonces(env: Env):
    org = env.tenant.org
    wallet = org.wallets.create(label="Payer")
    env.fund(wallet.address, "ETH", "1")
    env.fund(wallet.address, "USDC", "100")
    usdc, payee = env.chain.addresses["USDC"], address().lower()
    hashes: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def pay() -> None:
        barrier.wait()
        try:
            hashes.append(
                org.wallets.send_transaction(
                    CHAIN, wallet.address, to=usdc, data=TRANSFER.encode(payee, 1_000_000)
                )
            )
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=pay) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(set(hashes)) == 8
    receipts = [env.w3.eth.wait_for_transaction_receipt(h, timeout=30) for h in hashes]
    assert all(r["status"] == 1 for r in receipts)
    nonces = sorted(env.w3.eth.get_transaction(h)["nonce"] for h in hashes)
    assert nonces == list(range(8))
    assert env.balance("USDC", payee) == 8_000_000
