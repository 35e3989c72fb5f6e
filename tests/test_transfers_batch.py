"""Payout runs: `POST /v1/transfers/batch` (DESIGN §3 "Payout runs").

Over real HTTP on loopback, on the in-process devnet (a real EVM): each item is judged as
`POST /v1/transfers` would judge it, under its own key ``"{key}:{index}"``, and answered in
order; the batch's key replays the whole answer; an atomic batch writes every item or
none; the scope is `payments`; the approval threshold and the daily limit apply per item,
and the items awaiting approval are approved one by one; a wallet's legs in flight stop at
`max_in_flight` and the rest wait in its queue.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treasury import IdempotencyInFlight, IdempotencyKeyReused, Treasury, ValidationError
from treasury.config import Settings
from treasury.transfers import batch

from .conftest import MASTER_KEY, Tenant, make_tenant
from .helpers import BANK_ACCOUNT, address, onramp, py_policy, swap

CHAIN = 31337


def deposit(wallet: str, amount: str, to: str | None = None, **extra: Any) -> dict[str, Any]:
    return swap("deposit", wallet, to or wallet, amount, **extra)


@pytest.fixture
def wallet(treasury: Treasury, tenant: Tenant) -> str:
    """A managed wallet of the tenant holding 100 USDC and gas."""
    made = tenant.org.wallets.create(label="Payouts", idempotency_key="w").address
    treasury.chain(CHAIN).faucet(made, "USDC", "100")
    treasury.chain(CHAIN).faucet(made, "ETH", "1")
    return made


def post_batch(client: httpx.Client, key: str, items: list[Any], **extra: Any) -> httpx.Response:
    return client.post(
        "/v1/transfers/batch", json={"items": items, **extra}, headers={"Idempotency-Key": key}
    )


def counts(t: Treasury) -> dict[str, int]:
    """What a refused request must not have written: transfers, legs, events, keys."""
    with t.storage.read() as tx:
        return {
            table: int(tx.one(f"SELECT COUNT(*) AS n FROM {table}")["n"])
            for table in ("transfers", "transfer_legs", "events", "idempotency_keys")
        }


def test_mixed_items_are_answered_in_order_as_single_posts_would_be(
    treasury: Treasury, tenant: Tenant, client: httpx.Client, wallet: str
) -> None:
    tracked = tenant.org.wallets.track(address=address(), label="Watched").wallet.address
    items = [
        deposit(wallet, "10"),
        {"amount": "1.0000001", "source": {}},  # not a transfer body
        deposit(wallet, "20", to=address()),  # a mixed-case address with its checksum
        deposit(wallet, "80"),  # 70 is left once the items before it are accepted
        deposit(wallet, "5", to="0x" + "0" * 40),
        deposit(tracked, "5"),  # a tracked wallet cannot sign
        "not an object",
        deposit(wallet, "1", client_reference_id="inv-7"),
    ]
    answer = post_batch(client, "run-1", items)
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert [item["index"] for item in data] == list(range(len(items)))
    assert [item["status"] for item in data] == [201, 400, 201, 400, 400, 400, 400, 201]
    for item in data:  # either the 201 body or the error body, never both
        assert ("transfer" in item) != ("error" in item)
    accepted = [item["transfer"] for item in data if item["status"] == 201]
    assert [t["status"] for t in accepted] == ["submitted"] * 3
    assert accepted[2]["clientReferenceId"] == "inv-7"
    assert data[3]["error"]["details"]["fields"] == [
        {
            "location": "body",
            "field": "amount",
            "message": "insufficient balance: available 70 USDC, requested 80",
        }
    ]
    # each refusal is the error body POST /v1/transfers answers for that body alone
    for index in (1, 4, 5, 6):
        alone = client.post(
            "/v1/transfers", json=items[index], headers={"Idempotency-Key": f"alone-{index}"}
        )
        assert (alone.status_code, alone.json()) == (400, data[index]["error"]), index
    treasury.run_once()
    feed = {t.id: t.status for t in tenant.org.transfers.list()}
    assert sorted(feed) == sorted(t["id"] for t in accepted)
    assert set(feed.values()) == {"completed"}


def test_each_item_has_the_key_of_the_batch_and_its_index(
    client: httpx.Client, wallet: str
) -> None:
    items = [deposit(wallet, "1"), deposit(wallet, "500"), deposit(wallet, "2")]
    data = post_batch(client, "k", items).json()["data"]
    for index in (0, 2):  # POST /v1/transfers with the item's key replays it
        single = client.post(
            "/v1/transfers", json=items[index], headers={"Idempotency-Key": f"k:{index}"}
        )
        assert single.status_code == 201 and single.headers["Idempotent-Replayed"] == "true"
        assert single.json() == data[index]["transfer"]
        other = client.post(
            "/v1/transfers", json=items[1], headers={"Idempotency-Key": f"k:{index}"}
        )
        assert other.status_code == 422  # the item's key with another body
    # a refusal (400) is not kept under its key, as for a single POST: it runs afresh
    refused = client.post("/v1/transfers", json=items[1], headers={"Idempotency-Key": "k:1"})
    assert refused.status_code == 400 and "Idempotent-Replayed" not in refused.headers


def test_the_batch_key_replays_the_whole_answer(
    treasury: Treasury, client: httpx.Client, wallet: str
) -> None:
    items = [deposit(wallet, "3"), {"amount": "-1"}, deposit(wallet, "4")]
    first = post_batch(client, "again", items)
    treasury.run_once()  # the transfers move on; the replay is the answer as it was
    reordered = [dict(reversed(list(item.items()))) for item in items]  # the same JSON
    second = post_batch(client, "again", reordered)
    assert second.status_code == 200 and second.headers["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    with treasury.storage.read() as tx:
        assert tx.one("SELECT COUNT(*) AS n FROM transfers")["n"] == 2  # nothing twice
    other = post_batch(client, "again", items[:2])
    assert other.status_code == 422 and other.json()["error"].startswith("Idempotency-Key")
    atomic = post_batch(client, "again", items, atomic=True)  # atomic is part of the body
    assert atomic.status_code == 422


def test_a_batch_still_running_answers_409_to_the_same_key(
    treasury: Treasury, tenant: Tenant, wallet: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    org, started, release = tenant.org, threading.Event(), threading.Event()
    chunk = batch._chunk

    def slow(*args: Any, **kwargs: Any) -> None:
        started.set()
        assert release.wait(30)
        chunk(*args, **kwargs)

    monkeypatch.setattr(batch, "_chunk", slow)
    items = [deposit(wallet, "1"), deposit(wallet, "2")]
    answers: list[Any] = []
    running = threading.Thread(
        target=lambda: answers.append(org.transfers.create_batch(items, idempotency_key="b"))
    )
    running.start()
    assert started.wait(30)
    with pytest.raises(IdempotencyInFlight):
        org.transfers.create_batch(items, idempotency_key="b")
    release.set()
    running.join(30)
    (first,) = answers
    replay = org.transfers.create_batch(items, idempotency_key="b")
    assert replay.replayed and replay == first and [i.status for i in replay] == [201, 201]


def test_an_atomic_batch_writes_every_item_or_none(
    treasury: Treasury, tenant: Tenant, client: httpx.Client, wallet: str
) -> None:
    before = counts(treasury)
    items = [deposit(wallet, "30"), deposit(wallet, "30"), deposit(wallet, "50")]
    refused = post_batch(client, "atomic-1", items, atomic=True)
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "Invalid input",
        "details": {
            "fields": [
                {
                    "location": "body",
                    "field": "items.2.amount",
                    "message": "insufficient balance: available 40 USDC, requested 50",
                }
            ]
        },
    }
    assert counts(treasury) == before  # no transfer, leg, event or key: nothing signed
    invalid = post_batch(client, "atomic-2", [items[0], {"amount": "1e3"}], atomic=True)
    fields = invalid.json()["details"]["fields"]
    assert invalid.status_code == 400 and {f["field"] for f in fields} == {
        "items.1.amount",
        "items.1.source",
        "items.1.destination",
    }
    assert counts(treasury) == before
    again = post_batch(client, "atomic-1", items, atomic=True)  # a 400 is not kept
    assert again.status_code == 400 and "Idempotent-Replayed" not in again.headers
    accepted = post_batch(client, "atomic-3", [*items[:2], deposit(wallet, "40")], atomic=True)
    assert accepted.status_code == 200
    assert [item["status"] for item in accepted.json()["data"]] == [201, 201, 201]
    treasury.run_once()
    shown = {b.symbol: int(b.raw) for b in tenant.org.balances.get(CHAIN, wallet)}
    assert shown["c0"] == 100 * 10 ** treasury.decimals(CHAIN, "c0") and shown["USDC"] == 0


def test_the_batch_needs_scope_payments(
    treasury: Treasury, tenant: Tenant, base_url: str, wallet: str
) -> None:
    items = [deposit(wallet, "1")]
    for scopes, status in ((["read"], 403), (["approve"], 403), (["payments"], 200)):
        key = treasury.admin.create_api_key(tenant.org.id, user_id="u", scopes=scopes)
        answer = httpx.post(
            f"{base_url}/v1/transfers/batch",
            json={"items": items},
            headers={"x-api-key": key.secret, "Idempotency-Key": f"s-{scopes[0]}"},
        )
        assert answer.status_code == status, answer.text
        if status == 403:
            assert answer.json() == {
                "error": "Forbidden",
                "details": {"required_scope": "payments"},
            }


def test_the_approval_threshold_and_the_daily_limit_apply_per_item(
    treasury: Treasury, tenant: Tenant, client: httpx.Client, base_url: str, wallet: str
) -> None:
    tenant.org.policy.put(**py_policy(approval_threshold="50", daily_limit="150"))
    treasury.chain(CHAIN).faucet(wallet, "USDC", "100")  # 200: the limit refuses, not the balance
    bank = tenant.org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
    items = [
        deposit(wallet, "10"),  # under the threshold: signed and sent
        deposit(wallet, "60"),  # at or above it: accepted, awaiting a decision
        onramp(bank, wallet, "55"),  # a fiat one too
        deposit(wallet, "40"),  # 10 + 60 + 55 + 40 = 165: over the daily limit
        deposit(wallet, "20"),  # 145: within it
    ]
    data = post_batch(client, "policy", items).json()["data"]
    assert [item["status"] for item in data] == [201, 201, 201, 400, 201]
    assert "daily limit" in data[3]["error"]["details"]["fields"][0]["message"]
    shown = [item.get("transfer") for item in data]
    assert [t and (t["status"], t["approvalStatus"], t["waitingReason"]) for t in shown] == [
        ("submitted", "not_required", None),
        ("pending", "awaiting", "approval"),
        ("pending", "awaiting", "approval"),
        None,
        ("submitted", "not_required", None),
    ]
    approver = treasury.admin.create_api_key(tenant.org.id, user_id="boss", scopes=["approve"])
    headers = {"x-api-key": approver.secret}
    own = client.post(f"/v1/transfers/{shown[1]['id']}/approve")
    assert own.status_code == 403  # four eyes: not by the user who created the run
    for index in (1, 2):  # one by one
        decided = httpx.post(
            f"{base_url}/v1/transfers/{shown[index]['id']}/approve", headers=headers
        )
        assert decided.status_code == 200 and decided.json()["approvalStatus"] == "approved"
        treasury.run_once()
    treasury.run_once()
    treasury.run_once()
    statuses = {t.id: t.status for t in tenant.org.transfers.list()}
    assert statuses[shown[1]["id"]] == "completed"
    assert statuses[shown[2]["id"]] in ("submitted", "completed")  # the provider's pace
    assert statuses[shown[0]["id"]] == statuses[shown[4]["id"]] == "completed"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "items"),
        ({"items": []}, "items"),
        ({"items": [{}] * 1001}, "items"),
        ({"items": {"amount": "1"}}, "items"),
        ({"items": [{}], "atomic": "yes"}, "atomic"),
        ({"items": [{}], "extra": 1}, "extra"),
    ],
)
def test_a_body_that_is_not_a_batch_is_400_naming_the_field(
    client: httpx.Client, body: dict[str, Any], field: str
) -> None:
    answer = client.post("/v1/transfers/batch", json=body, headers={"Idempotency-Key": "bad"})
    assert answer.status_code == 400
    assert field in {f["field"] for f in answer.json()["details"]["fields"]}


def test_the_batch_key_is_required(client: httpx.Client, wallet: str) -> None:
    answer = client.post("/v1/transfers/batch", json={"items": [deposit(wallet, "1")]})
    assert answer.status_code == 400
    assert answer.json()["details"]["fields"][0]["field"] == "Idempotency-Key"


# -- the rule of item keys and order, over any mix --------------------------------------------

ITEM = st.sampled_from(["valid", "too precise", "zero address", "no source", "too much"])


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kinds=st.lists(ITEM, min_size=1, max_size=6),
    key=st.text(
        st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), min_size=1, max_size=30
    ),
)
def test_any_mix_is_answered_in_order_each_under_its_own_key(
    treasury: Treasury, tenant: Tenant, wallet: str, kinds: list[str], key: str
) -> None:
    org = tenant.org
    made = {
        "valid": lambda: deposit(wallet, "0.01"),
        "too precise": lambda: deposit(wallet, "0.0000001"),
        "zero address": lambda: deposit(wallet, "0.01", to="0x" + "0" * 40),
        "no source": lambda: {"amount": "1", "destination": deposit(wallet, "1")["destination"]},
        "too much": lambda: deposit(wallet, "1000000"),
    }
    items = [made[kind]() for kind in kinds]
    key = f"{key}-{len(kinds)}-{'.'.join(kinds)}"  # a new run each example
    answer = org.transfers.create_batch(items, idempotency_key=key)
    assert [item.index for item in answer] == list(range(len(items)))
    assert [item.status == 201 for item in answer] == [kind == "valid" for kind in kinds]
    for index, item in enumerate(answer):
        if item.status == 201:  # its own key replays it, as POST /v1/transfers would
            single = org.transfers.create(items[index], idempotency_key=f"{key}:{index}")
            assert single.replayed and single.id == item.result().id
        else:
            with pytest.raises(ValidationError):
                item.result()
    replay = org.transfers.create_batch(items, idempotency_key=key)
    assert replay.replayed and replay == answer
    with pytest.raises(IdempotencyKeyReused):
        org.transfers.create_batch([*items, items[0]], idempotency_key=key)


def test_a_key_a_database_cannot_store_is_refused(tenant: Tenant, wallet: str) -> None:
    """A NUL character (no PostgreSQL text holds one) or a lone surrogate (no UTF-8) is a
    400 on every storage (each was a 500 on PostgreSQL)."""
    items = [deposit(wallet, "0.01")]
    with pytest.raises(ValidationError, match="Idempotency-Key: must not contain a NUL"):
        tenant.org.transfers.create_batch(items, idempotency_key="a\x00b")
    with pytest.raises(ValidationError, match="Idempotency-Key: must be Unicode text"):
        tenant.org.transfers.create_batch(items, idempotency_key="a\ud800b")


# -- a wallet's legs in flight, and its queue -------------------------------------------------


@pytest.fixture
def capped(storage_url: str) -> Iterator[Treasury]:
    """A treasury whose wallets keep at most 4 legs in flight (two deposits)."""
    t = Treasury.open(
        storage_url, master_key=MASTER_KEY, settings=Settings.load({"max_in_flight": 4})
    )
    yield t
    t.close()


def test_legs_beyond_max_in_flight_wait_in_the_wallets_queue_in_order(capped: Treasury) -> None:
    org = make_tenant(capped).org
    wallet = org.wallets.create(label="Payouts").address
    capped.chain(CHAIN).faucet(wallet, "USDC", "100")
    capped.chain(CHAIN).faucet(wallet, "ETH", "1")
    answer = org.transfers.create_batch(
        [deposit(wallet, str(n)) for n in range(1, 6)], idempotency_key="q"
    )
    shown = [item.result() for item in answer]
    assert [(t.status, t.waiting_reason) for t in shown] == [
        ("submitted", None),
        ("submitted", None),
        ("pending", "nonce"),
        ("pending", "nonce"),
        ("pending", "nonce"),
    ]
    later = org.transfers.create(deposit(wallet, "6"), idempotency_key="single")
    assert (later.status, later.waiting_reason) == ("pending", "nonce")  # behind the queue
    replayed = org.transfers.create(deposit(wallet, "3"), idempotency_key="q:2")
    assert replayed.replayed and replayed.id == shown[2].id
    for _ in range(8):
        capped.run_once()
    ids = [t.id for t in shown] + [later.id]
    assert [org.transfers.get(i).status for i in ids] == ["completed"] * 6
    with capped.storage.read() as tx:
        legs = tx.query("SELECT transfer_id, nonce FROM transfer_legs ORDER BY nonce")
    nonces = [leg["nonce"] for leg in legs]
    assert nonces == list(range(nonces[0], nonces[0] + 12))  # consecutive, none twice
    order = list(dict.fromkeys(leg["transfer_id"] for leg in legs))
    assert order == ids  # first in the queue, first signed


def test_the_typed_client_sends_a_run(base_url: str, tenant: Tenant, wallet: str) -> None:
    from treasury.client import TreasuryClient
    from treasury.transfers import CreateTransfer, TransferBatch

    items = [CreateTransfer.model_validate(deposit(wallet, "1")), deposit(wallet, "500")]
    with TreasuryClient(base_url, api_key=tenant.secret) as c:
        run = c.transfers.create_batch(items, idempotency_key="typed")
        assert isinstance(run, TransferBatch) and [i.status for i in run] == [201, 400]
        assert run[0].result().status == "submitted"
        with pytest.raises(ValidationError, match="insufficient balance"):
            run[1].result()
        again = c.transfers.create_batch(items, idempotency_key="typed")
        assert again.replayed and again == run
        with pytest.raises(ValidationError) as refused:
            c.transfers.create_batch(items, atomic=True)  # a key of its own is made
        assert refused.value.details["fields"][0]["field"] == "items.1.amount"


@settings(max_examples=40, deadline=None)
@given(
    nonce=st.integers(0, 2**64 - 1),
    value=st.integers(0, 2**256 - 1),
    data=st.binary(max_size=200),
    gas=st.integers(21_000, 2**63 - 1),
    fee=st.integers(1, 2**128),
    tip=st.integers(0, 2**64),
)
def test_the_legs_the_jobs_read_back_are_what_eth_account_signed(
    nonce: int, value: int, data: bytes, gas: int, fee: int, tip: int
) -> None:
    """The jobs read every leg in flight each pass (`unsigned`, straight from its RLP):
    the fields are those eth-account decodes."""
    from eth_account import Account
    from eth_account.typed_transactions.typed_transaction import TypedTransaction
    from hexbytes import HexBytes

    from treasury.evm.signing import unsigned

    to = Account.create().address
    tx = {"type": 2, "chainId": CHAIN, "nonce": nonce, "to": to, "value": value, "data": data}
    tx |= {"gas": gas, "maxFeePerGas": fee, "maxPriorityFeePerGas": tip}
    raw = bytes(Account.create().sign_transaction(tx).raw_transaction)
    decoded = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
    assert unsigned(raw) == {
        "nonce": decoded["nonce"],
        "to": "0x" + bytes(decoded["to"]).hex(),
        "value": decoded["value"],
        "data": bytes(decoded["data"]),
        "gas": decoded["gas"],
        "maxFeePerGas": decoded["maxFeePerGas"],
        "maxPriorityFeePerGas": decoded["maxPriorityFeePerGas"],
    }


@settings(max_examples=40, deadline=None)
@given(
    nonce=st.integers(0, 2**64 - 1),
    value=st.integers(0, 2**256 - 1),
    data=st.binary(max_size=300),
    gas=st.integers(21_000, 2**63 - 1),
    fee=st.integers(0, 2**128),
    tip=st.integers(0, 2**64),
    chain_id=st.integers(1, 2**32),
)
def test_local_custody_signs_a_run_as_eth_account_does_byte_for_byte(
    nonce: int, value: int, data: bytes, gas: int, fee: int, tip: int, chain_id: int
) -> None:
    """A payout run signs thousands of legs: local custody signs EIP-1559 ones straight
    from their RLP, and the bytes are eth-account's (its signatures are deterministic)."""
    from eth_account import Account
    from eth_keys import keys

    from treasury.backends.custody.local import _eip1559, _plain_eip1559

    account = Account.create()
    tx = {"chainId": chain_id, "nonce": nonce, "to": Account.create().address, "value": value}
    tx |= {"data": data, "gas": gas, "maxFeePerGas": fee, "maxPriorityFeePerGas": tip}
    assert _plain_eip1559(tx)
    signed = _eip1559(keys.PrivateKey(bytes(account.key)), tx)
    assert signed == bytes(account.sign_transaction(tx).raw_transaction)
