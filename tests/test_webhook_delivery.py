"""Webhook delivery to a real HTTP receiver on loopback: who gets what, signatures that the
`standardwebhooks` library verifies, retries on an injected clock, and what stops them."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from treasury import Treasury
from treasury._records.events import emit
from treasury.evm.abi import APPROVE, Function

from .conftest import MASTER_KEY, make_tenant
from .helpers import address
from .webhook_receiver import receiving, verify_original, verify_standard

CHAIN = 31337
TRANSFER = Function("transfer(address,uint256)", ("bool",))


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 10, 5, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def later(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def t(new_storage_url, clock):
    treasury = Treasury.open(
        new_storage_url("w.db"),
        master_key=MASTER_KEY,
        clock=clock,
        allow_private_webhook_urls=True,
        chains={},
    )
    yield treasury
    treasury.close()


def event(
    t: Treasury, org_id: str, kind: str = "transaction.confirmed", wallet: str | None = None
) -> None:
    """An event in the outbox, as the indexer writes one (with its deliveries)."""
    data = {"hash": "0x" + random.randbytes(32).hex(), "status": kind.split(".")[1]}
    with t.storage.transaction() as tx:
        emit(
            tx,
            org_id=org_id,
            event_type=kind,
            wallet_address=wallet,
            data=data,
            now=t.now().isoformat(),
        )


def deliveries(t: Treasury) -> list[dict[str, Any]]:
    with t.storage.read() as tx:
        return tx.query(
            "SELECT message_id, status, attempts, last_status_code FROM webhook_deliveries"
        )


def test_confirmed_and_failed_transactions_reach_their_subscribers_only(new_storage_url):
    """On the devnet: one transaction confirms, one reverts; the indexer's events go out."""
    t = Treasury.open(
        new_storage_url("c.db"), master_key=MASTER_KEY, allow_private_webhook_urls=True
    )
    mine, theirs = make_tenant(t), make_tenant(t, "Globex")
    chain = t.chain(CHAIN)
    from eth_account import Account

    account = Account.create()
    owner = account.address.lower()
    chain.faucet(owner, "ETH", "1")
    chain.faucet(owner, "USDT", "5")
    wallet = mine.org.wallets.track(address=owner, label="Hot").wallet
    theirs.org.wallets.track(address=owner, label="Also theirs")
    usdt, facility = chain.addresses["USDT"], chain.addresses["swap_facility"]

    def send(data: bytes, gas: int = 100_000) -> str:
        w3 = chain.web3
        tx = {
            "to": w3.to_checksum_address(usdt),
            "data": "0x" + data.hex(),
            "value": 0,
            "gas": gas,
            "chainId": CHAIN,
            "nonce": w3.eth.get_transaction_count(account.address, "pending"),
            "maxFeePerGas": 10**10,
            "maxPriorityFeePerGas": 10**9,
        }
        signed = w3.eth.account.sign_transaction(tx, account.key)
        return "0x" + bytes(w3.eth.send_raw_transaction(signed.raw_transaction)).hex()

    confirmed = send(TRANSFER.encode(address(), 1))
    send(APPROVE.encode(facility, 1))
    failed = send(APPROVE.encode(facility, 2))  # USDT refuses non-zero to non-zero: reverts
    with receiving() as rx:
        hooks = {
            "confirmed": mine.org.webhooks.create(
                url=rx.at("/confirmed"), events=["transaction.confirmed"]
            ),
            "failed": mine.org.webhooks.create(url=rx.at("/failed"), events=["transaction.failed"]),
            "both": mine.org.webhooks.create(
                url=rx.at("/both"),
                events=["transaction.confirmed", "transaction.failed"],
                wallets=[owner.upper().replace("0X", "0x")],  # any case matches
            ),
            "elsewhere": mine.org.webhooks.create(
                url=rx.at("/elsewhere"), events=["transaction.confirmed"], wallets=[address()]
            ),
            "deleted": mine.org.webhooks.create(
                url=rx.at("/deleted"), events=["transaction.confirmed"]
            ),
            "theirs": theirs.org.webhooks.create(
                url=rx.at("/theirs"), events=["transaction.failed"]
            ),
        }
        mine.org.webhooks.delete(hooks["deleted"].id)
        for tx_hash, kind in ((confirmed, "other"), (failed, "approval")):
            mine.org.transactions.record(
                CHAIN,
                {
                    "hash": tx_hash,
                    "type": kind,
                    "from": owner,
                    "contract": usdt,
                    "token": usdt,
                    "amount": "1",
                    "walletId": wallet.id,
                },
            )
        summary = t.run_once()
        assert summary["webhooks_delivered"] == 4 and not summary.errors
        by_path = Counter(r.path for r in rx.got)
        assert by_path == {"/confirmed": 1, "/failed": 1, "/both": 2}
        for received in rx.got:
            hook = hooks[received.path.strip("/")]
            verified = verify_standard(hook.secret, received)  # raises if it does not verify
            assert verify_original(hook.secret, received)
            assert verified["type"] in hook.events and verified["data"]["chainId"] == CHAIN
            assert verified["data"]["hash"] in (confirmed, failed)
            assert verified["data"]["organizationId"] == mine.org.id
        assert {r.payload()["data"]["hash"] for r in rx.got if r.path == "/failed"} == {failed}
        assert t.run_once()["webhooks_delivered"] == 0  # nothing twice
    t.close()


def test_retries_follow_the_schedule_with_the_same_id(t, clock):
    org = make_tenant(t).org
    with receiving() as rx:
        hook = org.webhooks.create(url=rx.at(), events=["transaction.confirmed"])
        rx.script = [500, (503, {"Retry-After": "900"}), 302, 204]
        event(t, org.id)
        assert t.run_once()["webhooks_retried"] == 1
        clock.later(seconds=4.9)
        assert t.run_once()["webhooks_retried"] == 0 and len(rx.got) == 1  # not before 5 s
        clock.later(seconds=0.6)  # 5.5 s: past 5 s with at most 10 % jitter
        assert t.run_once()["webhooks_retried"] == 1 and len(rx.got) == 2
        clock.later(seconds=330)  # past the scheduled 5 min (+10 %): Retry-After holds it
        t.run_once()
        assert len(rx.got) == 2
        clock.later(seconds=900 - 330)
        t.run_once()
        assert len(rx.got) == 3 and [r.path for r in rx.got] == ["/hook"] * 3  # 302 not followed
        clock.later(minutes=33)
        assert t.run_once()["webhooks_delivered"] == 1
        assert len(set(rx.ids())) == 1  # one webhook-id across every attempt
        stamps = [int(r.headers["webhook-timestamp"]) for r in rx.got]
        first = int(datetime(2026, 10, 5, 12, tzinfo=UTC).timestamp())
        assert stamps[0] == first and stamps == sorted(stamps)  # the clock's time of each
        page = org.webhooks.deliveries(hook.id)
        assert [(d.status, d.attempts, d.last_status_code) for d in page.data] == [
            ("delivered", 4, 204)
        ]


def test_a_410_disables_the_webhook_and_the_last_retry_fails_the_delivery(t, clock):
    org = make_tenant(t).org
    with receiving() as rx:
        gone = org.webhooks.create(url=rx.at("/gone"), events=["transaction.confirmed"])
        rx.decide = lambda got: 410 if got.path == "/gone" else 500
        failing = org.webhooks.create(url=rx.at("/down"), events=["transaction.confirmed"])
        event(t, org.id)
        t.run_once()
        assert [h.active for h in org.webhooks.list().data] == [False, True]
        event(t, org.id)  # a later event: nothing for the disabled webhook
        assert Counter(d["status"] for d in deliveries(t)) == {"failed": 1, "pending": 2}
        for _ in range(12):
            clock.later(hours=24.5)
            t.run_once()
        assert Counter(d["status"] for d in deliveries(t)) == {"failed": 3}
        attempts = [d.attempts for d in org.webhooks.deliveries(failing.id).data]
        assert attempts == [10, 10]  # the first attempt and nine retries
        assert org.webhooks.deliveries(gone.id).data[0].last_status_code == 410


def test_a_receiver_failing_half_the_time_gets_every_event(t, clock):
    """500 events; a seeded coin decides each answer. Every event arrives in the end, each
    id at least once (a fair coin can fail one id ten times running: the seed keeps the
    run repeatable)."""
    org = make_tenant(t).org
    coin = random.Random(1)
    with receiving() as rx:
        org.webhooks.create(url=rx.at(), events=["transaction.confirmed"])
        rx.decide = lambda got: 204 if coin.random() < 0.5 else 500
        for _ in range(500):
            event(t, org.id)
        for _ in range(12):
            t.run_once()
            clock.later(hours=24.5)
        statuses = Counter(d["status"] for d in deliveries(t))
        assert statuses == {"delivered": 500}
        delivered = {r.message_id for r in rx.got}
        assert len(delivered) == 500


def test_a_receiver_down_for_ten_minutes_gets_everything_once_back(t, clock):
    org = make_tenant(t).org
    with receiving() as rx:
        org.webhooks.create(url=rx.at(), events=["transaction.confirmed"])
        down_until = clock.now + timedelta(minutes=10)
        rx.decide = lambda got: 503 if clock.now < down_until else 204
        for _ in range(20):
            event(t, org.id)
        for _ in range(60):  # a pass every minute for an hour
            t.run_once()
            clock.later(minutes=1)
        assert Counter(d["status"] for d in deliveries(t)) == {"delivered": 20}
        assert len({r.message_id for r in rx.got}) == 20


def test_delivery_endpoints_over_http(t, clock, tmp_path):
    import httpx

    from treasury.http import create_app
    from treasury.testing.server import serve

    tenant = make_tenant(t)
    with (
        receiving() as rx,
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}) as api,
    ):
        hook = api.post(
            "/v1/webhooks", json={"url": rx.at(), "events": ["transaction.confirmed"]}
        ).json()
        rx.decide = lambda got: 500
        for _ in range(5):
            event(t, tenant.org.id)
            clock.later(seconds=1)
        t.run_once()
        first = api.get(f"/v1/webhooks/{hook['id']}/deliveries", params={"limit": 2}).json()
        assert first["count"] == 2 and first["nextCursor"]
        rest = api.get(
            f"/v1/webhooks/{hook['id']}/deliveries",
            params={"limit": 10, "cursor": first["nextCursor"]},
        ).json()
        listed = first["data"] + rest["data"]
        assert len({d["id"] for d in listed}) == 5 and rest["nextCursor"] is None
        assert [d["createdAt"] for d in listed] == sorted(
            (d["createdAt"] for d in listed), reverse=True
        )
        one = listed[0]
        assert one["status"] == "pending" and one["attempts"] == 1 and one["lastStatusCode"] == 500
        assert one["nextAttemptAt"] and one["webhookId"] == hook["id"]
        rx.decide = lambda got: 204
        again = api.post(f"/v1/webhooks/{hook['id']}/deliveries/{one['id']}/retry")
        assert again.status_code == 200 and again.json()["status"] == "delivered"
        # a manual resend uses up no scheduled attempt
        assert again.json()["attempts"] == 1 and rx.got[-1].message_id == one["id"]
        assert (
            api.post(f"/v1/webhooks/{hook['id']}/deliveries/msg_{'0' * 32}/retry").status_code
            == 404
        )
        assert api.post(f"/v1/webhooks/{hook['id']}/deliveries/nope/retry").status_code == 400
        other = make_tenant(t, "Globex")
        with httpx.Client(base_url=url, headers={"x-api-key": other.secret}) as theirs:
            assert theirs.get(f"/v1/webhooks/{hook['id']}/deliveries").status_code == 404
