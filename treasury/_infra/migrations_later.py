"""Migrations from 12 on (`migrations.MIGRATIONS` appends them), in the same notation and
under the same rule: append-only, a released statement is never edited."""

LATER: list[tuple[int, str, list[str]]] = [
    (
        12,
        "deposits found from Transfer logs, a log cursor per chain; the transactions list;"
        " manual resends apart from scheduled attempts",
        [
            # one row per (log, organization watching its address): the event's guard
            """CREATE TABLE deposits (
                chain_id BIGINT NOT NULL,
                hash TEXT NOT NULL,
                log_index BIGINT NOT NULL,
                org_id TEXT NOT NULL REFERENCES organizations(id),
                address TEXT NOT NULL,
                token TEXT NOT NULL,
                raw TEXT NOT NULL,
                sender TEXT NOT NULL,
                block_number BIGINT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (chain_id, hash, log_index, org_id)){clustered}""",
            # the first block of a chain the deposit detector has not scanned yet
            """CREATE TABLE log_cursors (
                chain_id BIGINT PRIMARY KEY,
                next_block BIGINT NOT NULL,
                updated_at TEXT NOT NULL)""",
            """CREATE INDEX transactions_feed
                ON transactions (org_id, chain_id, created_at, id)""",
            """CREATE INDEX transactions_wallet_feed
                ON transactions (org_id, chain_id, wallet_address, created_at, id)""",
            "CREATE INDEX transfers_hash ON transfers (transaction_hash)",
            "CREATE INDEX transfer_legs_hash ON transfer_legs (hash)",
            # the deposit detector looks the recipients of a range's logs up by address
            "CREATE INDEX wallets_by_address ON wallets (address) WHERE deleted_at IS NULL",
            "CREATE INDEX virtual_wallets_address ON virtual_wallets (address)",
            # manual resends: logged apart from the scheduled attempts they do not use up
            """CREATE TABLE webhook_resends (
                id {pk},
                delivery_id BIGINT NOT NULL REFERENCES webhook_deliveries(id),
                at TEXT NOT NULL,
                status_code INTEGER,
                error TEXT,
                duration_ms INTEGER NOT NULL)""",
        ],
    ),
]
