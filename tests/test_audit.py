"""The audit log's hash chain: intact under concurrent requests, and `treasury audit
verify` naming the first broken link after a row is altered, deleted or reordered."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from contextlib import closing
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from treasury import Treasury
from treasury._infra import audit
from treasury.cli import main
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, Tenant, make_tenant, on_postgres, sealed
from .helpers import address, idem


def verify(url: str, *args: str) -> Result:
    """``treasury --storage URL audit verify`` as a user runs it."""
    env = {"TREASURY_MASTER_KEY": MASTER_KEY}
    return CliRunner().invoke(main, ["--storage", url, "audit", "verify", *args], env=env)


@pytest.fixture
def chain(treasury: Treasury, tenant: Tenant) -> list[dict[str, Any]]:
    """Six events of one organization (its creation, its key's, four requests), in order."""
    for number in range(4):
        tenant.org.recipients.create(
            address=address(), label=f"R{number}", idempotency_key=idem_key(number)
        )
    sealed(treasury)
    with treasury.storage.read() as tx:
        return tx.query(
            "SELECT seq, id FROM audit_events WHERE org_id = ? ORDER BY seq", (tenant.org.id,)
        )


def idem_key(number: int) -> str:
    return f"audit-{number}"


def test_an_intact_chain_verifies(treasury: Treasury, storage_url: str, chain) -> None:
    assert [row["seq"] for row in chain] == [1, 2, 3, 4, 5, 6]
    assert treasury.verify_audit_log() == (6, None)
    result = verify(storage_url, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"ok": True, "events": 6}


def _tampered(
    treasury: Treasury, storage_url: str, change: Callable[[Any], None]
) -> tuple[str, dict[str, Any]]:
    with treasury.storage.transaction() as tx:
        change(tx)
    result = verify(storage_url)
    assert result.exit_code == 1, result.output
    as_json = verify(storage_url, "--json")
    assert as_json.exit_code == 1
    return result.stderr, json.loads(as_json.stderr)["details"]


def test_an_altered_row_is_named(treasury: Treasury, storage_url: str, chain) -> None:
    third = chain[2]
    text, details = _tampered(
        treasury,
        storage_url,
        lambda tx: tx.execute("UPDATE audit_events SET status = 200 WHERE id = ?", (third["id"],)),
    )
    assert f"event {third['id']} (#3)" in text and "altered" in text
    assert (details["eventId"], details["sequence"]) == (third["id"], 3)


def test_a_deleted_row_is_named_by_the_row_after_it(
    treasury: Treasury, storage_url: str, chain
) -> None:
    text, details = _tampered(
        treasury,
        storage_url,
        lambda tx: tx.execute("DELETE FROM audit_events WHERE id = ?", (chain[2]["id"],)),
    )
    assert f"event {chain[3]['id']} (#4)" in text
    assert details["eventId"] == chain[3]["id"]


def test_deleting_the_last_rows_is_seen_at_the_head(
    treasury: Treasury, storage_url: str, chain
) -> None:
    text, details = _tampered(
        treasury,
        storage_url,
        lambda tx: tx.execute("DELETE FROM audit_events WHERE seq >= 5"),
    )
    assert "the chain ends at #4 but its head is #6" in text
    assert (details["sequence"], details["eventId"]) == (5, None)


def test_reordered_rows_are_named(treasury: Treasury, storage_url: str, chain) -> None:
    def swap(tx: Any) -> None:  # events 3 and 4 trade places
        second, third = chain[2]["id"], chain[3]["id"]
        tx.execute("UPDATE audit_events SET seq = -1 WHERE id = ?", (second,))
        tx.execute("UPDATE audit_events SET seq = 3 WHERE id = ?", (third,))
        tx.execute("UPDATE audit_events SET seq = 4 WHERE id = ?", (second,))

    text, details = _tampered(treasury, storage_url, swap)
    assert f"event {chain[3]['id']} (#3)" in text  # the one now in third place
    assert details["problem"].startswith("its previous hash")


def test_concurrent_requests_keep_one_unbroken_chain(treasury: Treasury) -> None:
    tenants = [make_tenant(treasury, name, f"user_{name}") for name in ("Acme", "Globex")]
    writers, each = 8, 5
    failures: list[str] = []
    with serve(create_app(treasury)) as url:

        def write(number: int) -> None:
            tenant = tenants[number % 2]
            with httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}) as client:
                for _ in range(each):
                    body = {"address": address(), "label": "R"}
                    answer = client.post("/v1/recipients", json=body, headers=idem())
                    if answer.status_code != 201:
                        failures.append(answer.text)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    checked, broken = treasury.verify_audit_log()
    assert broken is None
    assert checked == 2 * 2 + writers * each  # each organization and key, and every request
    for tenant in tenants:
        with treasury.storage.read() as tx:
            seqs = [
                row["seq"]
                for row in tx.query(
                    "SELECT seq FROM audit_events WHERE org_id = ? ORDER BY seq", (tenant.org.id,)
                )
            ]
        assert seqs == list(range(1, 2 + writers // 2 * each + 1))


EVENT_TEXT = st.one_of(st.none(), st.text(), st.just('"prevHash":""'), st.just('\\"'))


@given(
    fields=st.fixed_dictionaries(
        {
            "id": st.text(),
            "at": st.text(),
            "actor": st.fixed_dictionaries({"apiKeyId": st.text(), "userId": EVENT_TEXT}),
            "operation": st.text(),
            "objectType": st.text(),
            "objectId": EVENT_TEXT,
            "status": st.integers(),
            "requestId": EVENT_TEXT,
        }
    ),
    previous=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)
def test_the_database_chains_what_verify_checks(fields: dict[str, Any], previous: str) -> None:
    """The hash the database computes (``sha256_hex`` of the tag sent and the previous
    hash, here SQLite's) is the one `verify` expects of the event, whatever the fields
    hold; the tag does not depend on the previous hash."""
    import sqlite3

    from treasury.backends.storage.sqlite import _sha256_hex

    key = b"k" * 32
    tag = audit._tag(key, fields)
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.create_function("sha256_hex", 1, _sha256_hex, deterministic=True)
        (computed,) = conn.execute("SELECT sha256_hex(? || ?)", (tag, previous)).fetchone()
    assert computed == audit.hash_of({**fields, "prevHash": previous}, key)


def test_events_of_any_text_verify(treasury: Treasury) -> None:
    """Names and ids with quotes, backslashes and characters beyond ASCII hash alike in
    the database and in `verify` (UTF-8 on both sides)."""
    tenant = make_tenant(treasury, 'Zoë "Ltd" \\ 東京', 'user "ü" \\ 💸')
    tenant.org.recipients.create(address=address(), label="R", idempotency_key="zoë-1")
    with treasury.storage.transaction() as tx:  # an admin action names its own object
        audit.append(
            tx,
            treasury._runtime,
            tenant.org.id,
            actor=audit.Actor("key_x", 'user "ü" \\ 💸'),
            operation="recipients.create",
            object_type="recipient",
            object_id='"prevHash":""',
            status=201,
            request_id='req ü 💸 \\"',
        )
    assert treasury.verify_audit_log() == (4, None)


def test_pending_events_are_sealed_in_batches_until_none_is_left(
    treasury: Treasury, tenant: Tenant
) -> None:
    """On PostgreSQL the events wait outside the chain until sealed; a seal takes them
    all, a batch at a time, and a later one goes on from the head (SQLite chains at
    once: nothing waits)."""
    key = audit.audit_key(treasury._runtime.secrets)
    for number in range(5):
        tenant.org.recipients.create(address=address(), label="R", idempotency_key=f"b{number}")
    assert audit.seal(treasury.storage, key, limit=2) == (7 if on_postgres() else 0)
    tenant.org.recipients.create(address=address(), label="R", idempotency_key="b5")
    assert audit.seal(treasury.storage, key, tenant.org.id) == (1 if on_postgres() else 0)
    with treasury.storage.read() as tx:
        seqs = tx.query(
            "SELECT seq FROM audit_events WHERE org_id = ? ORDER BY seq", (tenant.org.id,)
        )
        pending = tx.one("SELECT COUNT(*) AS n FROM audit_pending")
    assert [row["seq"] for row in seqs] == list(range(1, 9)) and pending == {"n": 0}
    assert treasury.verify_audit_log() == (8, None)
