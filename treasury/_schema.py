"""The library's schema, as numbered migrations applied in order, each in one transaction.

Statements use ``{pk}`` (an auto-incrementing integer primary key), ``{blob}`` (binary)
``{clustered}`` (after a table whose rows should live in its primary key, SQLite's
``WITHOUT ROWID``; empty elsewhere) and ``{sortable_text}`` (text that sorts by code
point, e.g. ``TEXT COLLATE "C"`` on PostgreSQL), which each backend spells in its
dialect (`Storage.types`).
Timestamps are ISO 8601 UTC text of fixed width, so they sort as text.
"""

from __future__ import annotations

from .backends.storage.base import Storage

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "organizations, api keys, custody keys, wallets, recipients, bank accounts, "
        "webhooks, idempotency keys",
        [
            """CREATE TABLE organizations (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                created_at TEXT NOT NULL)""",
            """CREATE TABLE api_keys (
                id TEXT PRIMARY KEY,
                org_id TEXT NOT NULL REFERENCES organizations(id),
                user_id TEXT NOT NULL,
                secret_hash TEXT NOT NULL,
                created_at TEXT NOT NULL,
                expires_at TEXT,
                revoked_at TEXT)""",
            "CREATE INDEX api_keys_org ON api_keys (org_id)",
            """CREATE TABLE custody_keys (
                ref TEXT PRIMARY KEY,
                address TEXT NOT NULL,
                private_key {blob} NOT NULL,
                created_at TEXT NOT NULL)""",
            """CREATE TABLE wallets (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                address TEXT NOT NULL,
                label {sortable_text},
                type TEXT NOT NULL,
                custody_ref TEXT REFERENCES custody_keys(ref),
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                deleted_at TEXT)""",
            """CREATE UNIQUE INDEX wallets_live_address
                ON wallets (org_id, address) WHERE deleted_at IS NULL""",
            """CREATE TABLE recipients (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                address TEXT NOT NULL,
                label {sortable_text} NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                UNIQUE (org_id, address))""",
            """CREATE TABLE bank_accounts (
                id {pk},
                external_id TEXT NOT NULL UNIQUE,
                org_id TEXT NOT NULL REFERENCES organizations(id),
                user_id TEXT NOT NULL,
                bank_name TEXT NOT NULL,
                business_name TEXT,
                account_owner_name TEXT NOT NULL,
                account_owner_type TEXT NOT NULL,
                account_type TEXT NOT NULL,
                currency TEXT NOT NULL,
                checking_or_savings TEXT NOT NULL,
                account_number_last4 TEXT NOT NULL,
                account_number {blob} NOT NULL,
                routing_number {blob} NOT NULL,
                address {blob} NOT NULL,
                active INTEGER NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL)""",
            "CREATE INDEX bank_accounts_org ON bank_accounts (org_id)",
            """CREATE TABLE webhooks (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                url TEXT NOT NULL,
                events TEXT NOT NULL,
                wallets TEXT,
                secret {blob} NOT NULL,
                active INTEGER NOT NULL,
                created_at TEXT NOT NULL,
                deleted_at TEXT)""",
            "CREATE INDEX webhooks_org ON webhooks (org_id)",
            """CREATE TABLE idempotency_keys (
                org_id TEXT NOT NULL,
                key TEXT NOT NULL,
                fingerprint TEXT NOT NULL,
                state TEXT NOT NULL,
                status INTEGER,
                body TEXT,
                created_at TEXT NOT NULL,
                expires_at TEXT NOT NULL,
                PRIMARY KEY (org_id, key)){clustered}""",
        ],
    ),
    (
        2,
        "tracked transactions and the event outbox",
        [
            """CREATE TABLE transactions (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                chain_id BIGINT NOT NULL,
                hash TEXT NOT NULL,
                type TEXT NOT NULL,
                sender TEXT NOT NULL,
                contract TEXT NOT NULL,
                token TEXT NOT NULL,
                amount TEXT NOT NULL,
                wallet_id INTEGER NOT NULL REFERENCES wallets(id),
                wallet_address TEXT NOT NULL,
                status TEXT NOT NULL,
                receipt TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                UNIQUE (org_id, chain_id, hash))""",
            """CREATE INDEX transactions_pending
                ON transactions (chain_id, id) WHERE status = 'pending'""",
            "CREATE INDEX transactions_hash ON transactions (chain_id, hash)",
            """CREATE TABLE events (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                type TEXT NOT NULL,
                wallet_address TEXT,
                payload TEXT NOT NULL,
                created_at TEXT NOT NULL)""",
            "CREATE INDEX events_org ON events (org_id, id)",
        ],
    ),
]


def migrate(storage: Storage, *, now: str) -> int:
    """Apply every migration the store lacks; return the schema version reached."""
    with storage.transaction() as tx:
        # Under the lock: concurrent CREATE TABLE IF NOT EXISTS can fail in PostgreSQL.
        tx.lock("schema_migrations")
        tx.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    version = 0
    for number, description, statements in MIGRATIONS:
        with storage.transaction() as tx:
            tx.lock("schema_migrations")
            if tx.one("SELECT 1 AS done FROM schema_migrations WHERE version = ?", (number,)):
                version = number
                continue
            for statement in statements:
                tx.execute(statement.format(**storage.types))
            tx.execute(
                "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)",
                (number, description, now),
            )
            version = number
    return version
