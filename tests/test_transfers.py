"""Transfers end to end through the HTTP server, on the devnet with the sandbox provider:
the four pairings, what the feed shows between passes, and the exact balances moved."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import pytest

from treasury import Treasury
from treasury.evm.abi import BALANCE_OF
from treasury.http import create_app
from treasury.money import to_raw
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, address, idem, is_timestamp, offramp, onramp, swap

CHAIN = 31337
ORDER = ["pending", "submitted", "completed"]


@dataclass
class Env:
    t: Treasury
    api: httpx.Client
    chain: Any
    wallet: dict[str, Any]
    bank: str

    def balance(self, symbol: str, owner: str) -> int:
        data = self.chain.call(self.chain.addresses[symbol], BALANCE_OF.encode(owner))
        return int(BALANCE_OF.decode(data)[0])

    def raw(self, symbol: str, amount: str) -> int:
        """`amount` whole units of the chain's token `symbol` in raw units (its decimals)."""
        return to_raw(amount, self.t.decimals(CHAIN, symbol))

    def create(self, body: dict[str, Any], key: str | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else idem()
        return self.api.post("/v1/transfers", json=body, headers=headers)

    def follow(self, transfer_id: str, passes: int = 5) -> list[str]:
        """The statuses the API shows after creation and after each pass of the jobs."""
        seen = [self.api.get(f"/v1/transfers/{transfer_id}").json()["status"]]
        for _ in range(passes):
            summary = self.t.run_once()
            assert not summary.errors, summary.errors
            seen.append(self.api.get(f"/v1/transfers/{transfer_id}").json()["status"])
        return seen


@pytest.fixture(scope="module")
def env(module_storage_url) -> Iterator[Env]:
    t = Treasury.open(module_storage_url, master_key=MASTER_KEY)
    tenant = make_tenant(t)
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}, timeout=60) as api,
    ):
        wallet = api.post("/v1/wallets", json={"label": "Ops"}, headers=idem()).json()
        chain = t.chain(CHAIN)
        chain.faucet(wallet["address"], "ETH", "10")
        chain.faucet(wallet["address"], "USDC", "10000")
        bank = api.post("/v1/bank-accounts", json=BANK_ACCOUNT).json()
        yield Env(t, api, chain, wallet, bank["providerExternalAccountId"])
    t.close()


def assert_spec_shape(body: dict[str, Any]) -> None:
    """Every field of SPEC's Transfer and TransferSide, with its type."""
    assert set(body) >= {"id", "from", "to", "status", "transactionHash", "createdAt", "updatedAt"}
    assert body["status"] in [*ORDER, "failed"]
    assert body["transactionHash"] is None or isinstance(body["transactionHash"], str)
    assert is_timestamp(body["createdAt"]) and is_timestamp(body["updatedAt"])
    for side in (body["from"], body["to"]):
        assert set(side) == {"address", "bankAccount", "chainId", "currency", "amount"}
        assert (side["address"] is None) != (side["bankAccount"] is None)  # exactly one
        if side["address"] is not None:
            assert isinstance(side["chainId"], int) and side["address"] == side["address"].lower()
        else:
            assert side["chainId"] is None
            assert set(side["bankAccount"]) == {
                "id",
                "bankName",
                "accountOwnerName",
                "accountNumberLast4",
            }
        assert side["currency"] in {"usd", "usdc", "c0"} and Decimal(side["amount"]) > 0


def is_subsequence(seen: list[str]) -> bool:
    """The statuses only move forward along pending → submitted → completed."""
    positions = [ORDER.index(status) for status in seen]
    return positions == sorted(positions)


def test_deposit_usdc_into_c0(env):
    owner = env.wallet["address"]
    usdc, c0 = env.balance("USDC", owner), env.balance("c0", owner)
    r = env.create(swap("deposit", owner, owner, "125.5"))
    assert r.status_code == 201, r.text
    body = r.json()
    assert_spec_shape(body)
    assert body["status"] == "submitted" and body["transactionHash"].startswith("0x")
    assert body["from"]["currency"] == "usdc" and body["to"]["currency"] == "c0"
    assert body["from"]["amount"] == body["to"]["amount"] == "125.5"
    legs = legs_of(env, owner)
    assert [leg["type"] for leg in legs[-2:]] == ["approval", "deposit"]
    assert legs[-1]["hash"] == body["transactionHash"]
    seen = env.follow(body["id"], passes=2)
    assert is_subsequence(seen) and seen[-1] == "completed"
    assert env.balance("USDC", owner) == usdc - 125_500_000
    assert env.balance("c0", owner) == c0 + env.raw("c0", "125.5")
    swap_leg = env.api.get(f"/v1/{CHAIN}/transactions/{body['transactionHash']}").json()
    assert swap_leg["status"] == "confirmed" and swap_leg["receipt"]["status"] == 1


def test_withdraw_c0_to_another_address(env):
    owner, receiver = env.wallet["address"], address().lower()
    env.chain.faucet(owner, "c0", "50")
    c0 = env.balance("c0", owner)
    r = env.create(swap("withdraw", owner, receiver, "20"))
    assert r.status_code == 201, r.text
    body = r.json()
    assert_spec_shape(body)
    assert body["to"]["address"] == receiver and body["to"]["currency"] == "usdc"
    seen = env.follow(body["id"], passes=2)
    assert is_subsequence(seen) and seen[-1] == "completed"
    assert env.balance("c0", owner) == c0 - env.raw("c0", "20")
    assert env.balance("USDC", receiver) == 20_000_000
    assert [leg["type"] for leg in legs_of(env, owner)[-2:]] == ["approval", "withdrawal"]


def test_onramp_from_the_bank(env):
    receiver = address().lower()
    r = env.create(onramp(env.bank, receiver, "250", developer_fee="2.5"))
    assert r.status_code == 201, r.text
    body = r.json()
    assert_spec_shape(body)
    assert body["status"] == "pending" and body["transactionHash"] is None
    assert body["from"]["bankAccount"]["id"] == env.bank and body["from"]["currency"] == "usd"
    assert body["to"]["amount"] == "247.5"
    instructions = body["depositInstructions"]
    assert len(instructions["routingNumber"]) == 9 and instructions["message"]
    assert instructions["amount"] == "250" and instructions["currency"] == "usd"
    seen = env.follow(body["id"], passes=4)
    assert is_subsequence(seen) and seen[-1] == "completed"
    done = env.api.get(f"/v1/transfers/{body['id']}").json()
    assert done["transactionHash"] and env.balance("USDC", receiver) == 247_500_000


def test_offramp_to_the_bank(env):
    owner = env.wallet["address"]
    usdc = env.balance("USDC", owner)
    r = env.create(offramp(owner, env.bank, "75", client_reference_id="invoice-9"))
    assert r.status_code == 201, r.text
    body = r.json()
    assert_spec_shape(body)
    assert body["status"] == "pending" and body["transactionHash"].startswith("0x")
    assert body["clientReferenceId"] == "invoice-9" and body["depositInstructions"] is None
    assert body["to"]["bankAccount"]["accountNumberLast4"] == "6789"
    assert env.balance("USDC", owner) == usdc - 75_000_000  # the wallet paid, once
    leg = env.api.get(f"/v1/{CHAIN}/transactions/{body['transactionHash']}").json()
    assert leg["amount"] == "75000000" and leg["from"] == owner
    seen = env.follow(body["id"], passes=4)
    assert is_subsequence(seen) and seen[-1] == "completed"
    assert env.balance("USDC", owner) == usdc - 75_000_000


def test_the_feed_shows_every_pairing_newest_first(env):
    owner = env.wallet["address"]
    env.chain.faucet(owner, "c0", "1")
    for body in (
        swap("deposit", owner, owner, "1"),
        swap("withdraw", owner, owner, "1"),
        onramp(env.bank, owner, "1"),
        offramp(owner, env.bank, "1"),
    ):
        assert env.create(body).status_code == 201
    feed = env.api.get("/v1/transfers", params={"limit": 200}).json()
    assert feed["count"] == len(feed["data"]) and feed["nextCursor"] is None
    stamps = [(t["createdAt"], t["id"]) for t in feed["data"]]
    assert stamps == sorted(stamps, reverse=True)
    pairs = {(t["from"]["currency"], t["to"]["currency"]) for t in feed["data"]}
    assert pairs >= {("usdc", "c0"), ("c0", "usdc"), ("usd", "usdc"), ("usdc", "usd")}


def legs_of(env: Env, owner: str) -> list[dict[str, Any]]:
    """The wallet's tracked transactions, oldest first (what the transfers recorded)."""
    with env.t.storage.read() as tx:
        rows = tx.query(
            "SELECT hash FROM transactions WHERE wallet_address = ? ORDER BY id", (owner,)
        )
    return [env.api.get(f"/v1/{CHAIN}/transactions/{r['hash']}").json() for r in rows]
