"""A database made by an earlier version migrates forward with its data."""

from __future__ import annotations

import pytest

from treasury import Treasury
from treasury._infra import schema
from treasury.errors import Conflict

from .conftest import MASTER_KEY, make_tenant, on_postgres, open_storage
from .helpers import address

#: Migrations today's code writes on every change it makes (the audit log, the keys'
#: scopes, the numbers' counters, the pending audit events), whatever the rest of the
#: schema: an "earlier version" here has them too.
ALWAYS = (15, 17, 24, 25)


def earlier(
    migrations: list[tuple[int, str, list[str]]], *also: int
) -> list[tuple[int, str, list[str]]]:
    """The schema of an earlier version (`migrations`, the ones before), with `ALWAYS` and
    `also` (what today's code writes in the operations a test runs on the old schema:
    16 and 20, the policy a recipient's creation reads and the recipient's `pointed_at`)."""
    return migrations + [m for m in schema.MIGRATIONS if m[0] in (*ALWAYS, *also)]


def tables_query() -> str:
    if on_postgres():
        return (
            "SELECT table_name AS name FROM information_schema.tables"
            " WHERE table_schema = current_schema()"
        )
    return "SELECT name FROM sqlite_master WHERE type = 'table'"


def test_recipients_and_their_numbers_survive_migrations_6_and_8(storage_url, monkeypatch):
    monkeypatch.setattr(schema, "MIGRATIONS", earlier(schema.MIGRATIONS[:5]))
    old = Treasury.open(open_storage(storage_url), master_key=MASTER_KEY, chains={})
    org = make_tenant(old).org
    with old.storage.transaction() as tx:  # recipients as version 5 wrote them
        for number, label in ((1, "A"), (2, "B")):
            tx.execute(
                "INSERT INTO recipients (org_id, number, address, label, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (org.id, number, address().lower(), label, "2026-01-01", "2026-01-01"),
            )
    old.close()
    monkeypatch.undo()

    new = Treasury.open(open_storage(storage_url), master_key=MASTER_KEY, chains={})
    org = new.for_organization(org.id)
    assert [(r.id, r.label) for r in org.recipients.list().data] == [(1, "A"), (2, "B")]
    org.recipients.delete(2)
    made = org.recipients.create(address=address(), label="C", idempotency_key="c")
    assert made.id == 3  # the deleted number is not given again
    with new.storage.read() as tx:
        tables = {r["name"] for r in tx.query(tables_query())}
    assert "org_counters" not in tables and not tables & {"recipients_v6", "recipients_v8"}
    assert [(r.id, r.label) for r in org.recipients.list().data] == [(1, "A"), (3, "C")]
    with pytest.raises(Conflict):  # the live address stays unique after the rebuild
        org.recipients.create(address=made.address, label="again")
    new.close()


def test_idempotency_keys_survive_migration_9(storage_url, monkeypatch):
    monkeypatch.setattr(schema, "MIGRATIONS", earlier(schema.MIGRATIONS[:8], 16, 20))
    old = Treasury.open(open_storage(storage_url), master_key=MASTER_KEY, chains={})
    org = make_tenant(old).org
    first = org.recipients.create(address=address(), label="Kept", idempotency_key="k1")
    old.close()
    monkeypatch.undo()

    new = Treasury.open(open_storage(storage_url), master_key=MASTER_KEY, chains={})
    org = new.for_organization(org.id)
    replay = org.recipients.create(address=first.address, label="Kept", idempotency_key="k1")
    assert replay == first and replay.replayed  # the stored outcome moved with its key
    second = org.recipients.create(address=address(), label="New", idempotency_key="k2")
    assert org.recipients.create(
        address=second.address, label="New", idempotency_key="k2"
    ).replayed  # and new keys are held in the rebuilt table
    with new.storage.read() as tx:
        tables = {r["name"] for r in tx.query(tables_query())}
    assert "idempotency_keys_v9" not in tables
    new.close()


def test_wallets_and_their_transactions_survive_migration_13(storage_url, monkeypatch):
    from .test_custody_plugin import MemoryCustody

    before = [number for number, _, _ in schema.MIGRATIONS].index(13)
    monkeypatch.setattr(schema, "MIGRATIONS", earlier(schema.MIGRATIONS[:before]))
    old = Treasury.open(open_storage(storage_url), master_key=MASTER_KEY, chains={})
    org = make_tenant(old).org
    kept = org.wallets.create(label="Kept", idempotency_key="w1")
    gone = org.wallets.create(label="Gone", idempotency_key="w2")
    org.wallets.delete(gone.address)
    with old.storage.transaction() as tx:  # a tracked transaction of the kept wallet
        row = tx.one("SELECT id FROM wallets WHERE number = ?", (kept.id,))
        tx.execute(
            "INSERT INTO transactions (org_id, chain_id, hash, type, sender, contract, token,"
            " amount, wallet_id, wallet_number, wallet_address, status, created_at,"
            " updated_at) VALUES (?, 31337, ?, 'deposit', ?, ?, 'USDC', '1', ?, ?, ?,"
            " 'pending', '2026-01-01', '2026-01-01')",
            (
                org.id,
                "0x" + "ab" * 32,
                kept.address,
                address().lower(),
                row["id"],
                kept.id,
                kept.address,
            ),
        )
    old.close()
    monkeypatch.undo()

    new = Treasury.open(
        open_storage(storage_url), master_key=MASTER_KEY, chains={}, custody=MemoryCustody()
    )
    org = new.for_organization(org.id)
    assert [(w.id, w.label) for w in org.wallets.list().data] == [(kept.id, "Kept")]
    made = org.wallets.create(label="Elsewhere")  # a key no `custody_keys` row holds
    assert made.id == 3  # the deleted number is not given again
    with new.storage.read() as tx:
        tables = {r["name"] for r in tx.query(tables_query())}
        moved = tx.one(
            "SELECT w.number FROM transactions AS t JOIN wallets AS w ON w.id = t.wallet_id"
            " WHERE t.hash = ?",
            ("0x" + "ab" * 32,),
        )
    assert not tables & {"wallets_v13", "transactions_v13"}
    assert moved is not None and moved["number"] == kept.id  # still the kept wallet's
    with pytest.raises(Conflict):  # the live address stays unique after the rebuild
        org.wallets.track(address=kept.address, label="Again")
    new.close()


def test_keys_made_before_scopes_keep_full_access(storage_url, monkeypatch):
    from treasury._infra.crypto import hash_secret

    before = [number for number, _, _ in schema.MIGRATIONS].index(15)
    storage = open_storage(storage_url)
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:before])
    schema.migrate(storage, now="2026-01-01T00:00:00.000000Z")
    monkeypatch.undo()
    secret = "trk_0123456789abcdef_" + "s" * 43
    with storage.transaction() as tx:  # an organization and a key as version 13 wrote them
        tx.execute("INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'Old', '2026')")
        tx.execute(
            "INSERT INTO api_keys (id, org_id, user_id, secret_hash, created_at)"
            " VALUES ('key_0123456789abcdef', 'o1', 'u', ?, '2026')",
            (hash_secret(secret),),
        )
    new = Treasury.open(storage, master_key=MASTER_KEY, chains={})
    org = new.for_api_key(secret)
    assert org.scopes == ("admin",)
    assert new.admin.list_api_keys("o1")[0].scopes == ["admin"]
    org.webhooks.list()  # an admin-only operation
    new.close()
