"""Event order (DESIGN "Webhooks", `sequence`): every payload carries `sequence`, which
grows with each event of the organization in the order the changes were committed; the
first attempts of one object's events to one webhook go out in that order, the next one
only after the previous one ended, so a receiver never meets `transfer.completed` before
the same transfer's `transfer.submitted`. Real HTTP on loopback (a threaded receiver
that answers some events slowly, as a busy receiver does), real storage."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from treasury import Treasury
from treasury._records.events import emit
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant

STEPS = ("transfer.created", "transfer.submitted", "transfer.completed")


class Receiver:
    """Records each payload as it arrives; `transfer.created` and `transfer.submitted`
    are answered slowly (the receiver's database is busy), the last step at once."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        size = int(environ.get("CONTENT_LENGTH") or 0)
        payload = json.loads(environ["wsgi.input"].read(size))
        if payload["type"] != "transfer.completed":
            time.sleep(0.2)
        with self.lock:
            self.got.append(payload)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


@pytest.fixture
def live(storage_url: str) -> Iterator[dict[str, Any]]:
    t = Treasury.open(storage_url, master_key=MASTER_KEY, allow_private_webhook_urls=True)
    tenant = make_tenant(t)
    receiver = Receiver()
    with serve(receiver) as url:
        tenant.org.webhooks.create(url=url + "/hook", events=list(STEPS))
        yield {"t": t, "tenant": tenant, "receiver": receiver}
    t.close()


def _emit(t: Treasury, org_id: str, event_type: str, transfer_id: str) -> None:
    status = event_type.partition(".")[2]
    with t.storage.transaction() as tx:
        emit(
            tx,
            org_id=org_id,
            event_type=event_type,
            wallet_address=None,
            data={"id": transfer_id, "status": status},
            now=t.now().isoformat(),
        )


def test_first_attempts_of_one_transfers_events_arrive_in_order(live: dict[str, Any]) -> None:
    t, org_id, receiver = live["t"], live["tenant"].org.id, live["receiver"]
    transfers = [str(uuid.uuid4()) for _ in range(8)]
    for step in STEPS:  # each transfer moves a step, as the worker's passes move them
        for transfer_id in transfers:
            _emit(t, org_id, step, transfer_id)
    summary = t.run_once()
    assert not summary.errors, summary.errors
    got = receiver.got
    assert len(got) == 24, [p["type"] for p in got]
    for transfer_id in transfers:
        seen = [p["type"] for p in got if p["data"]["id"] == transfer_id]
        assert seen == list(STEPS), (transfer_id, seen)  # no completed before submitted
    # every payload carries `sequence`, and one transfer's grow in the order they arrived
    for transfer_id in transfers:
        numbers = [p["sequence"] for p in got if p["data"]["id"] == transfer_id]
        assert numbers == sorted(numbers) and len(set(numbers)) == 3
    assert sorted(p["sequence"] for p in got) == list(range(1, 25))


def test_sequence_grows_with_commit_order(live: dict[str, Any]) -> None:
    """A transaction that took a number first commits first: another emitting for the
    same organization meanwhile waits, and gets the next number."""
    t, org_id = live["t"], live["tenant"].org.id
    first_emitted, order = threading.Event(), []

    def slow() -> None:
        with t.storage.transaction() as tx:
            emit(tx, org_id=org_id, event_type="transfer.created", wallet_address=None,
                 data={"id": "slow"}, now=t.now().isoformat())  # fmt: skip
            first_emitted.set()
            time.sleep(0.5)
            order.append("slow committed")

    worker = threading.Thread(target=slow)
    worker.start()
    assert first_emitted.wait(10)
    _emit(t, org_id, "transfer.created", "fast")
    order.append("fast committed")
    worker.join()
    assert order == ["slow committed", "fast committed"]
    with t.storage.read() as tx:
        rows = tx.query("SELECT payload FROM events WHERE org_id = ? ORDER BY id", (org_id,))
    numbers = {json.loads(r["payload"])["data"]["id"]: json.loads(r["payload"])["sequence"]
               for r in rows}  # fmt: skip
    assert numbers["slow"] < numbers["fast"]


def test_each_organization_counts_its_own_events(live: dict[str, Any]) -> None:
    t = live["t"]
    other = make_tenant(t, name="Globex", user_id="user_2")
    _emit(t, live["tenant"].org.id, "transfer.created", "a")
    _emit(t, other.org.id, "transfer.created", "b")
    _emit(t, live["tenant"].org.id, "transfer.created", "c")
    with t.storage.read() as tx:
        rows = tx.query("SELECT org_id, payload FROM events ORDER BY id", ())
    shown = [(r["org_id"], json.loads(r["payload"])["sequence"]) for r in rows]
    assert [n for org, n in shown if org == other.org.id] == [1]
    assert [n for org, n in shown if org == live["tenant"].org.id] == [1, 2]
