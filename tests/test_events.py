"""Events a treasury team listens for, delivered to a real receiver on loopback from a
treasury on the devnet: transfer lifecycles, deposits from outside, on-ramp payouts as
tracked transactions, ``event`` beside ``type``, manual resends, the transactions list."""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from typing import Any

import httpx
import pytest
from eth_account import Account
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treasury import Treasury
from treasury.evm.abi import TRANSFER

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, address, events, onramp, swap
from .webhook_receiver import Received, receiving, verify_original, verify_standard

CHAIN = 31337
TRANSFER_EVENTS = [
    "transfer.created",
    "transfer.submitted",
    "transfer.completed",
    "transfer.failed",
]
ALL = [*TRANSFER_EVENTS, "transaction.confirmed", "transaction.failed", "deposit.received"]


@pytest.fixture
def t(new_storage_url):
    treasury = Treasury.open(
        new_storage_url("e.db"), master_key=MASTER_KEY, allow_private_webhook_urls=True
    )
    yield treasury
    treasury.close()


@pytest.fixture(scope="module")
def store_only(module_storage_url):
    treasury = Treasury.open(module_storage_url, master_key=MASTER_KEY, chains={})
    yield treasury
    treasury.close()


def payloads(got: list[Received], secret: str) -> list[dict[str, Any]]:
    """Every delivery verified as a receiver would (both signatures); its payload."""
    out = []
    for received in got:
        assert verify_original(secret, received)
        payload = verify_standard(secret, received)
        assert payload["event"] == payload["type"]  # for receivers of the original service
        out.append(payload)
    return out


def passes(t: Treasury, n: int, watch: Any = None) -> list[Any]:
    """`n` passes; what `watch()` answered after each."""
    seen = []
    for _ in range(n):
        summary = t.run_once()
        assert not summary.errors, summary.errors
        if watch is not None:
            seen.append(watch())
    return seen


def test_an_onramp_into_an_own_wallet_announces_each_status_once_and_its_payout(t):
    tenant = make_tenant(t)
    org = tenant.org
    wallet = org.wallets.create(label="Ops")
    bank = org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
    with receiving() as rx:
        hook = org.webhooks.create(url=rx.at(), events=ALL)
        passes(t, 1)  # the deposit detector starts watching
        moved = org.transfers.create(onramp(bank, wallet.address, "25"), idempotency_key="r1")
        at_status = {moved.status: moved.to_json()}
        for shown in passes(t, 5, lambda: org.transfers.get(moved.id)):
            at_status.setdefault(shown.status, shown.to_json())
        assert at_status.keys() == {"pending", "submitted", "completed"}
        got = payloads(rx.got, hook.secret)
    kinds = Counter(p["type"] for p in got)
    assert kinds == {
        "transfer.created": 1,
        "transfer.submitted": 1,
        "transfer.completed": 1,
        "transaction.confirmed": 1,  # the payout, tracked as a transaction of the wallet
    }  # and no deposit.received: the service's own on-ramp paid it
    by_type = {p["type"]: p["data"] for p in got}
    for status in ("created", "submitted", "completed"):
        shown = at_status["pending" if status == "created" else status]
        assert by_type[f"transfer.{status}"] == shown
    assert by_type["transfer.created"]["depositInstructions"]["accountNumber"]
    payout = by_type["transaction.confirmed"]
    final = org.transfers.get(moved.id)
    assert payout["hash"] == final.transaction_hash and payout["walletId"] == wallet.id
    assert payout["type"] == "deposit" and payout["receipt"]["status"] == 1
    assert len({r.message_id for r in rx.got}) == len(rx.got)  # no duplicate ids


def test_an_onchain_deposit_announces_created_submitted_completed(t):
    tenant = make_tenant(t)
    org = tenant.org
    wallet = org.wallets.create(label="Hot")
    chain = t.chain(CHAIN)
    chain.faucet(wallet.address, "ETH", "1")
    chain.faucet(wallet.address, "USDC", "10")
    with receiving() as rx:
        hook = org.webhooks.create(url=rx.at(), events=TRANSFER_EVENTS)
        narrowed = org.webhooks.create(url=rx.at("/other"), events=ALL, wallets=[address()])
        org.webhooks.create(url=rx.at("/mine"), events=TRANSFER_EVENTS, wallets=[wallet.address])
        moved = org.transfers.create(swap("deposit", wallet.address, wallet.address, "4"))
        submitted = org.transfers.get(moved.id)
        completed = passes(t, 2, lambda: org.transfers.get(moved.id))[-1]
        got = payloads([r for r in rx.got if r.path == "/hook"], hook.secret)
        got.sort(key=lambda p: TRANSFER_EVENTS.index(p["type"]))  # sent concurrently
        assert not [r for r in rx.got if r.path == "/other"]  # its wallets exclude both sides
        assert len([r for r in rx.got if r.path == "/mine"]) == 3  # one side is its wallet
        assert narrowed.wallets
    assert [p["type"] for p in got] == [
        "transfer.created",
        "transfer.submitted",
        "transfer.completed",
    ]
    created, sub, done = (p["data"] for p in got)
    assert created["status"] == "pending" and created["id"] == moved.id
    assert sub == submitted.to_json() and done == completed.to_json()
    assert completed.status == "completed"


def test_an_outside_payment_is_one_deposit_and_own_transfers_are_none(t):
    mine, theirs = make_tenant(t), make_tenant(t, "Globex")
    wallet = mine.org.wallets.create(label="Receiving")
    other = mine.org.wallets.create(label="Other")
    chain = t.chain(CHAIN)
    payer = Account.create()
    chain.faucet(payer.address, "ETH", "1")
    chain.faucet(payer.address, "USDC", "50")
    chain.faucet(wallet.address, "ETH", "1")
    with receiving() as rx:
        hook = mine.org.webhooks.create(url=rx.at("/all"), events=["deposit.received"])
        mine.org.webhooks.create(
            url=rx.at("/other"), events=["deposit.received"], wallets=[other.address]
        )
        theirs.org.webhooks.create(url=rx.at("/theirs"), events=["deposit.received"])
        passes(t, 1)  # the detector starts at the head
        w3 = chain.web3
        usdc = chain.addresses["USDC"]
        signed = w3.eth.account.sign_transaction(
            {
                "to": w3.to_checksum_address(usdc),
                "value": 0,
                "gas": 100_000,
                "data": "0x" + TRANSFER.encode(wallet.address, 12_340_000).hex(),
                "chainId": CHAIN,
                "nonce": 0,
                "maxFeePerGas": 10**10,
                "maxPriorityFeePerGas": 10**9,
            },
            payer.key,
        )
        paid = "0x" + bytes(w3.eth.send_raw_transaction(signed.raw_transaction)).hex()
        # the service's own transfer into the same wallet: a swap of its USDC into c0
        mine.org.transfers.create(swap("deposit", wallet.address, wallet.address, "2"))
        passes(t, 3)
        got = payloads([r for r in rx.got if r.path == "/all"], hook.secret)
        assert {r.path for r in rx.got} == {"/all"}
    assert len(got) == 1
    data = got[0]["data"]
    assert data == {
        "chainId": CHAIN,
        "address": wallet.address,
        "token": "USDC",
        "tokenAddress": usdc,
        "amount": "12.34",
        "raw": "12340000",
        "from": payer.address.lower(),
        "transactionHash": paid,
        "logIndex": data["logIndex"],
        "blockNumber": data["blockNumber"],
    }
    assert got[0]["type"] == "deposit.received"


def test_a_manual_resend_leaves_the_schedule_and_attempts_alone(t):
    tenant = make_tenant(t)
    org = tenant.org
    wallet = org.wallets.create(label="Hot")
    chain = t.chain(CHAIN)
    chain.faucet(wallet.address, "ETH", "1")
    chain.faucet(wallet.address, "USDC", "10")
    with receiving() as rx:
        rx.decide = lambda got: 503
        hook = org.webhooks.create(url=rx.at(), events=["transfer.created"])
        org.transfers.create(swap("deposit", wallet.address, wallet.address, "1"))
        passes(t, 1)
        (before,) = org.webhooks.deliveries(hook.id).data
        assert before.attempts == 1 and before.next_attempt_at is not None
        for _ in range(7):
            after = org.webhooks.retry_delivery(hook.id, before.id)
        assert len(rx.got) == 8
        assert after.attempts == 1 and after.next_attempt_at == before.next_attempt_at
        assert after.status == "pending" and after.last_status_code == 503
        rx.decide = lambda got: 204
        done = org.webhooks.retry_delivery(hook.id, before.id)
        assert done.status == "delivered" and done.attempts == 1


def test_the_transactions_list_newest_first_by_wallet_in_pages_per_organization(t):
    from treasury.http import create_app
    from treasury.testing.server import serve

    mine, theirs = make_tenant(t), make_tenant(t, "Globex")
    one = mine.org.wallets.create(label="One")
    two = mine.org.wallets.create(label="Two")
    foreign = theirs.org.wallets.create(label="Theirs")
    token = t.chain(CHAIN).addresses["USDC"]

    def record(org: Any, wallet: Any, n: int) -> str:
        tx_hash = "0x" + f"{n:064x}"
        org.transactions.record(
            CHAIN,
            {
                "hash": tx_hash,
                "type": "other",
                "from": wallet.address,
                "contract": token,
                "token": token,
                "amount": str(n),
                "walletId": wallet.id,
            },
        )
        return tx_hash

    made = [record(mine.org, one if n % 2 else two, n) for n in range(1, 8)]
    record(theirs.org, foreign, 99)
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": mine.secret}) as api,
    ):
        hashes, cursor = [], None
        while True:
            page = api.get(
                f"/v1/{CHAIN}/transactions",
                params={"limit": 3, **({"cursor": cursor} if cursor else {})},
            )
            assert page.status_code == 200
            body = page.json()
            assert body["count"] == len(body["data"]) <= 3
            hashes += [row["hash"] for row in body["data"]]
            cursor = body["nextCursor"]
            if cursor is None:
                break
        assert hashes == made[::-1]  # newest first, every one once, none of another org
        only = api.get(f"/v1/{CHAIN}/transactions", params={"wallet": one.address}).json()
        assert [row["hash"] for row in only["data"]] == made[::-2]
        assert {row["walletId"] for row in only["data"]} == {one.id}
        foreign_page = api.get(f"/v1/{CHAIN}/transactions", params={"wallet": foreign.address})
        assert foreign_page.json()["data"] == []
        with httpx.Client(base_url=url, headers={"x-api-key": theirs.secret}) as them:
            theirs_page = them.get(f"/v1/{CHAIN}/transactions", params={"limit": 3}).json()
            assert [row["hash"] for row in theirs_page["data"]] == ["0x" + f"{99:064x}"]
            forged = them.get(
                f"/v1/{CHAIN}/transactions",
                params={
                    "cursor": api.get(f"/v1/{CHAIN}/transactions", params={"limit": 1}).json()[
                        "nextCursor"
                    ]
                },
            )
            assert forged.status_code == 400  # a cursor of another organization
        assert api.get(f"/v1/{CHAIN}/transactions", params={"wallet": "nope"}).status_code == 400
        assert api.get("/v1/5/transactions").status_code == 404
    listed = mine.org.transactions.list(CHAIN, wallet=two.address, limit=50)
    assert [row.hash for row in listed.data] == made[-2::-2]


STATUSES = ["pending", "submitted", "completed", "failed"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.tuples(st.sampled_from(STATUSES), st.booleans()), min_size=1, max_size=8))
def test_each_status_reached_is_announced_once_in_order(store_only, steps):
    """Whatever moves are tried (some recording the claim, in any order, repeated), the
    events are ``transfer.created`` once the claim is recorded, then exactly the
    statuses the state table let it reach, each once, each with the Transfer as shown."""
    from treasury.transfers import store

    t = store_only
    org = make_tenant(t, f"Org {random.random()}").org
    transfer_id, now = str(uuid.uuid4()), t.now().isoformat()
    side = {
        "address": address(),
        "bank_account": None,
        "chain_id": CHAIN,
        "currency": "usdc",
        "amount": "1",
    }
    box = t._runtime.secrets
    with t.storage.transaction() as tx:
        tx.execute("DELETE FROM events")
        store.insert(
            tx,
            {
                "id": transfer_id,
                "org_id": org.id,
                "pairing": "deposit",
                "status": "pending",
                "stage": "claimed",
                "amount": "1",
                "developer_fee": "0",
                "chain_id": CHAIN,
                "source": json.dumps(side),
                "destination": json.dumps(side),
                "created_at": now,
                "updated_at": now,
            },
        )
    reached, recorded = [], False
    for status, records in steps:
        with t.storage.transaction() as tx:
            fields = {"stage": "recorded"} if records else {}
            before = store.get(tx, transfer_id)["status"]
            moved = store.move(tx, transfer_id, status, now, box=box, **fields)
            assert moved == (status in store.NEXT[before])
            if records and not recorded:
                reached.append("created")
                recorded = True
            if moved:
                reached.append(status)
    announced = [(kind, data) for kind, data in events(t, "transfer.")]
    assert [kind for kind, _ in announced] == [f"transfer.{s}" for s in reached]
    assert len(set(reached)) == len(reached)
    with t.storage.read() as tx:
        final = store.shown(store.get(tx, transfer_id), box).to_json()
    if announced:
        assert announced[-1][1]["status"] == final["status"] or reached[-1] == "created"


def pay(chain: Any, payer: Any, to: str, raw: int, nonce: int) -> str:
    """An outside account sends USDC to `to` (a plain ERC-20 transfer)."""
    w3 = chain.web3
    signed = w3.eth.account.sign_transaction(
        {
            "to": w3.to_checksum_address(chain.addresses["USDC"]),
            "value": 0,
            "gas": 100_000,
            "data": "0x" + TRANSFER.encode(to, raw).hex(),
            "chainId": CHAIN,
            "nonce": nonce,
            "maxFeePerGas": 10**10,
            "maxPriorityFeePerGas": 10**9,
        },
        payer.key,
    )
    return "0x" + bytes(w3.eth.send_raw_transaction(signed.raw_transaction)).hex()


def test_deposits_wait_for_confirmations_and_are_found_once_per_organization(
    new_storage_url, monkeypatch
):
    """Two organizations track one address, a third has it as a deleted wallet, a virtual
    wallet receives too; with 2 confirmations, and with the recipients looked up per
    range (more watched addresses than the topic filter takes); a rescan finds nothing new."""
    from treasury.config import Settings
    from treasury.deposits import detector

    monkeypatch.setattr(detector, "TOPIC_LIMIT", 1)
    t = Treasury.open(
        new_storage_url("d.db"),
        master_key=MASTER_KEY,
        settings=Settings.load({"deposit_confirmations": 2}, env={}),
    )
    try:
        first, second, third = make_tenant(t), make_tenant(t, "Globex"), make_tenant(t, "Initech")
        shared = address().lower()
        first.org.wallets.track(address=shared, label="Shared")
        second.org.wallets.track(address=shared, label="Also")
        gone = third.org.wallets.track(address=shared, label="Gone").wallet
        third.org.wallets.delete(gone.address)
        virtual = first.org.virtual_wallet.get().address
        chain = t.chain(CHAIN)
        payer = Account.create()
        chain.faucet(payer.address, "ETH", "1")
        chain.faucet(payer.address, "USDC", "10")
        passes(t, 1)
        to_shared = pay(chain, payer, shared, 1_000_000, 0)
        pay(chain, payer, virtual, 2_500_000, 1)
        assert t.run_once()["deposits_received"] == 0  # mined, not yet confirmed
        assert events(t, "deposit.") == []
        chain.faucet(address(), "ETH", "1")  # two more blocks on top
        chain.faucet(address(), "ETH", "1")
        assert t.run_once()["deposits_received"] == 3
        assert t.run_once()["deposits_received"] == 0
        found = [
            (d["address"], d["amount"], d["transactionHash"]) for _, d in events(t, "deposit.")
        ]
        assert sorted(found) == sorted(
            [(shared, "1", to_shared), (shared, "1", to_shared), (virtual, "2.5", found[-1][2])]
        )
        with t.storage.read() as tx:
            orgs = tx.query("SELECT org_id FROM deposits WHERE hash = ?", (to_shared,))
        assert sorted(r["org_id"] for r in orgs) == sorted([first.org.id, second.org.id])
        with t.storage.transaction() as tx:  # scanned again from the start: nothing new
            tx.execute("UPDATE log_cursors SET next_block = 0")
        assert t.run_once()["deposits_received"] == 0 and len(events(t, "deposit.")) == 3
    finally:
        t.close()


def test_two_workers_scanning_at_once_announce_a_deposit_once(t):
    """Two threads run the detector over the same blocks at once: the per-chain lock and
    the cursor's re-check let one record the range; the deposit is announced once."""
    import threading

    from treasury.deposits.detector import scan_chain

    org = make_tenant(t).org
    wallet = org.wallets.track(address=address().lower(), label="In").wallet
    chain = t.chain(CHAIN)
    payer = Account.create()
    chain.faucet(payer.address, "ETH", "1")
    chain.faucet(payer.address, "USDC", "5")
    passes(t, 1)
    for nonce in range(3):
        pay(chain, payer, wallet.address, 1_000_000 + nonce, nonce)
    barrier, found = threading.Barrier(2), []

    def worker() -> None:
        barrier.wait()
        found.append(scan_chain(t._runtime, CHAIN)["deposits_received"])

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(found) == 3 and sorted(found)[0] in (0, 3)
    raws = sorted(data["raw"] for _, data in events(t, "deposit."))
    assert raws == ["1000000", "1000001", "1000002"]
