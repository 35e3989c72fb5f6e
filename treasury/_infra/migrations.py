"""The library's schema, as numbered migrations (`schema.migrate` applies them in order).

Statements use ``{pk}`` (an auto-incrementing 64-bit integer primary key), ``{blob}`` (binary),
``{clustered}`` (after a table whose rows should live in its primary key, SQLite's
``WITHOUT ROWID``; empty elsewhere) and ``{sortable_text}`` (text that sorts by code
point, e.g. ``TEXT COLLATE "C"`` on PostgreSQL), which each backend spells in its
dialect (`Storage.types`).
Timestamps are ISO 8601 UTC text of fixed width, so they sort as text. Every id and
chain id is a 64-bit integer (``{pk}``, ``BIGINT``). Migrations are append-only: a
released statement is never edited, a change is a new migration.
"""

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
                wallet_id BIGINT NOT NULL REFERENCES wallets(id),
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
    (
        3,
        "per-organization numbers; two-phase claims; sealed idempotent outcomes",
        [
            """CREATE TABLE org_counters (
                org_id TEXT NOT NULL,
                name TEXT NOT NULL,
                value BIGINT NOT NULL,
                PRIMARY KEY (org_id, name)){clustered}""",
            *(
                statement
                for table in ("wallets", "recipients", "bank_accounts", "webhooks")
                for statement in (
                    f"ALTER TABLE {table} ADD COLUMN number BIGINT",
                    f"""UPDATE {table} SET number = (SELECT COUNT(*) FROM {table} AS earlier
                        WHERE earlier.org_id = {table}.org_id AND earlier.id <= {table}.id)""",
                    f"CREATE UNIQUE INDEX {table}_number ON {table} (org_id, number)",
                    f"""INSERT INTO org_counters (org_id, name, value)
                        SELECT org_id, '{table}', MAX(number) FROM {table} GROUP BY org_id""",
                )
            ),
            "ALTER TABLE transactions ADD COLUMN wallet_number BIGINT",
            """UPDATE transactions SET wallet_number =
                (SELECT number FROM wallets WHERE wallets.id = transactions.wallet_id)""",
            "ALTER TABLE bank_accounts ADD COLUMN state TEXT NOT NULL DEFAULT 'registered'",
            "ALTER TABLE bank_accounts ADD COLUMN lease_until TEXT",
            "ALTER TABLE bank_accounts ADD COLUMN provider_account_id TEXT",
            """CREATE INDEX bank_accounts_registering
                ON bank_accounts (lease_until) WHERE state = 'registering'""",
            "ALTER TABLE idempotency_keys ADD COLUMN resource TEXT",
            "ALTER TABLE idempotency_keys ADD COLUMN outcome {blob}",
            """CREATE INDEX idempotency_keys_resource
                ON idempotency_keys (org_id, resource) WHERE resource IS NOT NULL""",
        ],
    ),
    (
        4,
        "transfers and their signed legs; virtual accounts and wallets; provider customers",
        [
            "ALTER TABLE organizations ADD COLUMN provider_customer_id TEXT",
            """CREATE TABLE transfers (
                id TEXT PRIMARY KEY,
                org_id TEXT NOT NULL REFERENCES organizations(id),
                pairing TEXT NOT NULL,
                status TEXT NOT NULL,
                stage TEXT NOT NULL,
                amount TEXT NOT NULL,
                developer_fee TEXT NOT NULL,
                client_reference_id TEXT,
                source TEXT NOT NULL,
                destination TEXT NOT NULL,
                chain_id BIGINT,
                wallet_address TEXT,
                bank_account_id TEXT,
                transaction_hash TEXT,
                provider_transfer_id TEXT,
                provider_state TEXT,
                deposit_instructions TEXT,
                deposit_address TEXT,
                failure TEXT,
                lease_until TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL)""",
            "CREATE INDEX transfers_feed ON transfers (org_id, created_at, id)",
            """CREATE INDEX transfers_open ON transfers (stage, lease_until)
                WHERE status IN ('pending', 'submitted')""",
            """CREATE TABLE transfer_legs (
                transfer_id TEXT NOT NULL REFERENCES transfers(id),
                position INTEGER NOT NULL,
                kind TEXT NOT NULL,
                contract TEXT NOT NULL,
                token TEXT NOT NULL,
                amount TEXT NOT NULL,
                chain_id BIGINT NOT NULL,
                sender TEXT NOT NULL,
                nonce BIGINT NOT NULL,
                hash TEXT NOT NULL,
                raw {blob} NOT NULL,
                sent INTEGER NOT NULL,
                PRIMARY KEY (transfer_id, position))""",
            "CREATE INDEX transfer_legs_unsent ON transfer_legs (chain_id, sender) WHERE sent = 0",
            """CREATE TABLE virtual_accounts (
                id {pk},
                org_id TEXT NOT NULL UNIQUE REFERENCES organizations(id),
                user_id TEXT NOT NULL,
                provider_virtual_account_id TEXT,
                provider_customer_id TEXT,
                provider_wallet_id TEXT,
                developer_fee_percent TEXT,
                deposit TEXT,
                usdb_balance TEXT,
                balance_read_at TEXT,
                label TEXT NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL)""",
            """CREATE TABLE virtual_wallets (
                id {pk},
                org_id TEXT NOT NULL UNIQUE REFERENCES organizations(id),
                address TEXT NOT NULL,
                custody_ref TEXT NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL)""",
        ],
    ),
    (
        5,
        "webhook deliveries and their attempts",
        [
            """CREATE TABLE webhook_deliveries (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                webhook_id BIGINT NOT NULL REFERENCES webhooks(id),
                event_id BIGINT NOT NULL REFERENCES events(id),
                message_id TEXT NOT NULL UNIQUE,
                event_type TEXT NOT NULL,
                status TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                next_attempt_at TEXT,
                last_status_code INTEGER,
                last_error TEXT,
                lease_until TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                UNIQUE (webhook_id, event_id))""",
            """CREATE INDEX webhook_deliveries_due
                ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'""",
            """CREATE INDEX webhook_deliveries_feed
                ON webhook_deliveries (webhook_id, created_at, id)""",
            """CREATE TABLE webhook_attempts (
                delivery_id BIGINT NOT NULL REFERENCES webhook_deliveries(id),
                attempt INTEGER NOT NULL,
                at TEXT NOT NULL,
                status_code INTEGER,
                error TEXT,
                duration_ms INTEGER NOT NULL,
                PRIMARY KEY (delivery_id, attempt))""",
        ],
    ),
    (
        6,
        "recipients are deleted softly; numbers come from the rows, not from counters",
        [
            """CREATE TABLE recipients_v6 (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                number BIGINT NOT NULL,
                address TEXT NOT NULL,
                label {sortable_text} NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                deleted_at TEXT)""",
            # new ids, in the old order: explicit ids would leave PostgreSQL's identity
            # behind them (nothing refers to a recipient's id; the API shows its number)
            """INSERT INTO recipients_v6 (org_id, number, address, label, created_at,
                updated_at) SELECT org_id, number, address, label, created_at, updated_at
                FROM recipients ORDER BY id""",
            "DROP TABLE recipients",
            "ALTER TABLE recipients_v6 RENAME TO recipients",
            "CREATE UNIQUE INDEX recipients_number ON recipients (org_id, number)",
            """CREATE UNIQUE INDEX recipients_live_address
                ON recipients (org_id, address) WHERE deleted_at IS NULL""",
            "DROP TABLE org_counters",
        ],
    ),
    (
        7,
        "yield snapshots of every holder's c0 balance, and the periods published from them",
        [
            """CREATE TABLE yield_snapshots (
                id {pk},
                chain_id BIGINT NOT NULL,
                taken_at TEXT NOT NULL,
                apy TEXT NOT NULL)""",
            "CREATE INDEX yield_snapshots_time ON yield_snapshots (chain_id, taken_at)",
            """CREATE TABLE yield_balances (
                snapshot_id BIGINT NOT NULL REFERENCES yield_snapshots(id),
                address TEXT NOT NULL,
                balance TEXT NOT NULL,
                PRIMARY KEY (snapshot_id, address)){clustered}""",
            """CREATE TABLE yield_periods (
                chain_id BIGINT NOT NULL,
                period_id BIGINT NOT NULL,
                root TEXT,
                total TEXT NOT NULL,
                count INTEGER NOT NULL,
                starts_at TEXT NOT NULL,
                ends_at TEXT NOT NULL,
                published_at TEXT NOT NULL,
                artifact TEXT,
                root_tx TEXT,
                PRIMARY KEY (chain_id, period_id)){clustered}""",
            """CREATE TABLE yield_leaves (
                chain_id BIGINT NOT NULL,
                account TEXT NOT NULL,
                period_id BIGINT NOT NULL,
                leaf_index BIGINT NOT NULL,
                amount TEXT NOT NULL,
                proof TEXT NOT NULL,
                PRIMARY KEY (chain_id, account, period_id)){clustered}""",
        ],
    ),
    (
        8,
        "recipients live in their (organization, number) key: one B-tree less per write",
        [
            """CREATE TABLE recipients_v8 (
                org_id TEXT NOT NULL REFERENCES organizations(id),
                number BIGINT NOT NULL,
                address TEXT NOT NULL,
                label {sortable_text} NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                deleted_at TEXT,
                PRIMARY KEY (org_id, number)){clustered}""",
            """INSERT INTO recipients_v8 (org_id, number, address, label, created_at,
                updated_at, deleted_at) SELECT org_id, number, address, label, created_at,
                updated_at, deleted_at FROM recipients""",
            "DROP TABLE recipients",
            "ALTER TABLE recipients_v8 RENAME TO recipients",
            """CREATE UNIQUE INDEX recipients_live_address
                ON recipients (org_id, address) WHERE deleted_at IS NULL""",
        ],
    ),
    (
        9,
        "idempotency keys kept in insertion order, found through an index of their key",
        [  # fat rows under random keys made every insert rebalance a page of a few rows
            """CREATE TABLE idempotency_keys_v9 (org_id TEXT NOT NULL, key TEXT NOT NULL,
                fingerprint TEXT NOT NULL, state TEXT NOT NULL, status INTEGER, body TEXT,
                created_at TEXT NOT NULL, expires_at TEXT NOT NULL, resource TEXT,
                outcome {blob}, PRIMARY KEY (org_id, key))""",
            "INSERT INTO idempotency_keys_v9 SELECT * FROM idempotency_keys",  # same order
            "DROP TABLE idempotency_keys",
            "ALTER TABLE idempotency_keys_v9 RENAME TO idempotency_keys",
            """CREATE INDEX idempotency_keys_resource
                ON idempotency_keys (org_id, resource) WHERE resource IS NOT NULL""",
        ],
    ),
    (
        10,
        "pays exactly once: sticky ambiguity, reservations of unfinished transfers, nonce holes",
        [
            # 1 once any upstream step of the transfer had an unknown outcome: from then on
            # it is resolved only by evidence (a receipt, the nonce passing, the provider)
            "ALTER TABLE transfers ADD COLUMN ambiguous INTEGER NOT NULL DEFAULT 0",
            # what the transfer holds of its source wallet until it is final: raw units of
            # a token, and wei of gas at its signed fee (decimal text: they outgrow BIGINT)
            "ALTER TABLE transfers ADD COLUMN reserve_token TEXT",
            "ALTER TABLE transfers ADD COLUMN reserve_raw TEXT",
            "ALTER TABLE transfers ADD COLUMN reserve_wei TEXT",
            """CREATE INDEX transfers_wallet_open ON transfers (chain_id, wallet_address)
                WHERE status IN ('pending', 'submitted')""",
            "CREATE INDEX transfer_legs_sender ON transfer_legs (chain_id, sender, nonce)",
            # a wallet's missing nonce, first seen at a pass: filled at a later one
            """CREATE TABLE nonce_holes (
                chain_id BIGINT NOT NULL,
                sender TEXT NOT NULL,
                nonce BIGINT NOT NULL,
                seen_at TEXT NOT NULL,
                PRIMARY KEY (chain_id, sender))""",
        ],
    ),
    (
        11,
        "the sandbox fiat provider's customers, accounts, transfers and virtual accounts",
        [
            """CREATE TABLE sandbox_fiat (
                kind TEXT NOT NULL,
                id TEXT NOT NULL,
                body {blob} NOT NULL,
                PRIMARY KEY (kind, id))""",
        ],
    ),
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
    (
        13,
        "a wallet names its custody key without a foreign key: any custody plugin keeps keys",
        [  # `custody_keys` is local custody's own table; another custody's refs are not in it.
            # Rebuilt with the transactions that refer to them (SQLite cannot drop a
            # constraint, nor a table other rows refer to): new ids in the old order, as in
            # migration 6, so PostgreSQL's identities stay ahead; numbers are kept.
            """CREATE TABLE wallets_v13 (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                number BIGINT,
                address TEXT NOT NULL,
                label {sortable_text},
                type TEXT NOT NULL,
                custody_ref TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                deleted_at TEXT)""",
            """INSERT INTO wallets_v13 (org_id, number, address, label, type, custody_ref,
                created_at, updated_at, deleted_at) SELECT org_id, number, address, label,
                type, custody_ref, created_at, updated_at, deleted_at FROM wallets ORDER BY id""",
            """CREATE TABLE transactions_v13 (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                chain_id BIGINT NOT NULL,
                hash TEXT NOT NULL,
                type TEXT NOT NULL,
                sender TEXT NOT NULL,
                contract TEXT NOT NULL,
                token TEXT NOT NULL,
                amount TEXT NOT NULL,
                wallet_id BIGINT NOT NULL REFERENCES wallets_v13(id),
                wallet_number BIGINT,
                wallet_address TEXT NOT NULL,
                status TEXT NOT NULL,
                receipt TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                UNIQUE (org_id, chain_id, hash))""",
            """INSERT INTO transactions_v13 (org_id, chain_id, hash, type, sender, contract,
                token, amount, wallet_id, wallet_number, wallet_address, status, receipt,
                created_at, updated_at) SELECT t.org_id, t.chain_id, t.hash, t.type, t.sender,
                t.contract, t.token, t.amount, n.id, t.wallet_number, t.wallet_address,
                t.status, t.receipt, t.created_at, t.updated_at
                FROM transactions AS t JOIN wallets AS o ON o.id = t.wallet_id
                JOIN wallets_v13 AS n ON n.org_id = o.org_id AND n.number = o.number
                ORDER BY t.id""",
            "DROP TABLE transactions",
            "DROP TABLE wallets",
            # renaming rewrites transactions_v13's reference to the new name
            "ALTER TABLE wallets_v13 RENAME TO wallets",
            "ALTER TABLE transactions_v13 RENAME TO transactions",
            """CREATE UNIQUE INDEX wallets_live_address
                ON wallets (org_id, address) WHERE deleted_at IS NULL""",
            "CREATE UNIQUE INDEX wallets_number ON wallets (org_id, number)",
            """CREATE INDEX transactions_pending
                ON transactions (chain_id, id) WHERE status = 'pending'""",
            "CREATE INDEX transactions_hash ON transactions (chain_id, hash)",
            # migration 12's indexes of the rebuilt tables
            """CREATE INDEX transactions_feed
                ON transactions (org_id, chain_id, created_at, id)""",
            """CREATE INDEX transactions_wallet_feed
                ON transactions (org_id, chain_id, wallet_address, created_at, id)""",
            "CREATE INDEX wallets_by_address ON wallets (address) WHERE deleted_at IS NULL",
        ],
    ),
    (
        14,
        "fiat onboarding: each organization's provider status and hosted KYB link; the"
        " fiat job's cursor over the provider's transfers updated since its last pass",
        [
            "ALTER TABLE organizations ADD COLUMN onboarding_status TEXT",
            "ALTER TABLE organizations ADD COLUMN onboarding_url TEXT",
            """CREATE TABLE fiat_cursor (
                name TEXT PRIMARY KEY,
                position TEXT NOT NULL)""",
        ],
    ),
    (
        15,
        "scopes on API keys (earlier keys keep admin); the audit log and its chain heads",
        [
            """ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT '["admin"]'""",
            """CREATE TABLE audit_events (
                org_id TEXT NOT NULL REFERENCES organizations(id),
                seq BIGINT NOT NULL,
                id TEXT NOT NULL,
                at TEXT NOT NULL,
                actor TEXT NOT NULL,
                operation TEXT NOT NULL,
                object_type TEXT NOT NULL,
                object_id TEXT,
                status INTEGER NOT NULL,
                request_id TEXT,
                prev_hash TEXT NOT NULL,
                hash TEXT NOT NULL,
                PRIMARY KEY (org_id, seq)){clustered}""",
            """CREATE TABLE audit_heads (
                org_id TEXT PRIMARY KEY REFERENCES organizations(id),
                seq BIGINT NOT NULL,
                hash TEXT NOT NULL)""",
        ],
    ),
    (
        16,
        "policies per organization; a transfer's approval and its creator",
        [
            # one row per organization that set a policy (none: every control off)
            """CREATE TABLE policies (
                org_id TEXT PRIMARY KEY REFERENCES organizations(id),
                approval_threshold TEXT,
                daily_limit TEXT,
                destinations TEXT NOT NULL,
                updated_at TEXT NOT NULL)""",
            "ALTER TABLE transfers ADD COLUMN approval_status TEXT NOT NULL DEFAULT 'not_required'",
            "ALTER TABLE transfers ADD COLUMN created_by_key TEXT",
            "ALTER TABLE transfers ADD COLUMN created_by_user TEXT",
            # the approvals' jobs: transfers awaiting a decision, or approved and not started
            """CREATE INDEX transfers_approval ON transfers (approval_status, created_at)
                WHERE approval_status IN ('awaiting', 'approved')""",
        ],
    ),
    (
        17,
        "the audit chain advanced in SQL: heads keep the previous hash, in their key's"
        " B-tree; sha256_hex",
        [  # SQLite: a table and its key's index were two pages written by every append
            """CREATE TABLE audit_heads_v17 (
                org_id TEXT PRIMARY KEY REFERENCES organizations(id),
                seq BIGINT NOT NULL,
                prev_hash TEXT,
                hash TEXT NOT NULL){clustered}""",
            "INSERT INTO audit_heads_v17 (org_id, seq, hash) SELECT org_id, seq, hash FROM audit_heads",
            "DROP TABLE audit_heads",
            "ALTER TABLE audit_heads_v17 RENAME TO audit_heads",
            "{define_sha256_hex}",
        ],
    ),
    (
        18,
        "the chain can go back: the blocks the service acted on (their hashes, compared with"
        " the canonical chain each pass); every signed version of a leg; when a leg was"
        " broadcast; why a transfer waits; gas stations' top-ups",
        [
            # one row per receipt settled on, deposit log recorded, detector cursor
            """CREATE TABLE chain_marks (
                chain_id BIGINT NOT NULL,
                kind TEXT NOT NULL,
                ref TEXT NOT NULL,
                block_number BIGINT NOT NULL,
                block_hash TEXT NOT NULL,
                orphaned INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (chain_id, kind, ref))""",
            "CREATE INDEX chain_marks_block ON chain_marks (chain_id, block_number)",
            # the versions a replaced leg was signed in before its current one
            """CREATE TABLE leg_versions (
                hash TEXT PRIMARY KEY,
                transfer_id TEXT NOT NULL,
                position INTEGER NOT NULL,
                chain_id BIGINT NOT NULL,
                raw {blob} NOT NULL,
                created_at TEXT NOT NULL)""",
            "CREATE INDEX leg_versions_leg ON leg_versions (transfer_id, position)",
            "ALTER TABLE transfer_legs ADD COLUMN broadcast_block BIGINT",
            "ALTER TABLE transfers ADD COLUMN waiting_reason TEXT",
            # a gas station's top-ups of a wallet's ETH, one at a time per wallet
            """CREATE TABLE gas_topups (
                hash TEXT PRIMARY KEY,
                chain_id BIGINT NOT NULL,
                wallet TEXT NOT NULL,
                station TEXT NOT NULL,
                amount TEXT NOT NULL,
                settled INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL)""",
            "CREATE INDEX gas_topups_open ON gas_topups (chain_id, wallet) WHERE settled = 0",
        ],
    ),
    (
        19,
        "deposits reversed by a reorg; logs held while an open on-ramp may have paid them;"
        " the open on-ramps by chain and organization",
        [
            "ALTER TABLE deposits ADD COLUMN reversed_at TEXT",
            # a log into a wallet that matches an open on-ramp of its organization (token,
            # amount, address): neither a deposit nor forgotten until that on-ramp settles
            """CREATE TABLE held_logs (
                chain_id BIGINT NOT NULL,
                hash TEXT NOT NULL,
                log_index BIGINT NOT NULL,
                org_id TEXT NOT NULL REFERENCES organizations(id),
                address TEXT NOT NULL,
                token TEXT NOT NULL,
                raw TEXT NOT NULL,
                sender TEXT NOT NULL,
                block_number BIGINT NOT NULL,
                block_hash TEXT NOT NULL,
                first_seen TEXT NOT NULL,
                PRIMARY KEY (chain_id, hash, log_index, org_id))""",
            """CREATE INDEX transfers_open_onramps ON transfers (chain_id, org_id)
                WHERE pairing = 'onramp' AND status IN ('pending', 'submitted')""",
        ],
    ),
    (
        20,
        "controls, second round: the policy's destination cooldown and gas station; when a"
        " recipient was last pointed at its address; the audit chain keyed (re-hashed by"
        " treasury's own step, `audit.rekey`)",
        [
            """ALTER TABLE policies ADD COLUMN destination_cooldown_hours INTEGER NOT NULL
                DEFAULT 24""",
            "ALTER TABLE policies ADD COLUMN gas_station BIGINT",
            "ALTER TABLE recipients ADD COLUMN pointed_at TEXT",
            "UPDATE recipients SET pointed_at = created_at",
        ],
    ),
    (
        21,
        "events: each organization's sequence (in commit order) and the object they are"
        " about; deliveries go out in that order per object and webhook",
        [
            """CREATE TABLE event_sequences (
                org_id TEXT PRIMARY KEY REFERENCES organizations(id),
                last BIGINT NOT NULL){clustered}""",
            "ALTER TABLE events ADD COLUMN sequence BIGINT",
            "ALTER TABLE webhook_deliveries ADD COLUMN object_key TEXT",
            "ALTER TABLE webhook_deliveries ADD COLUMN sequence BIGINT",
            "UPDATE events SET sequence = id",
            "UPDATE webhook_deliveries SET sequence = event_id",
            """INSERT INTO event_sequences (org_id, last)
                SELECT org_id, MAX(id) FROM events GROUP BY org_id""",
            # the earlier first attempts of one object to one webhook, still to be made
            """CREATE INDEX webhook_deliveries_order
                ON webhook_deliveries (webhook_id, object_key, sequence)
                WHERE status = 'pending' AND attempts = 0""",
        ],
    ),
    (
        22,
        "the books: an append-only double-entry journal with running sums, its groups;"
        " reconciliation runs, breaks and each pair's last tie-out; the transfers of a wallet"
        " by update (a balance at a past time); history posted by treasury's own step"
        " (`journal_history.post_history`)",
        [
            # one row per (group, account, token): signed raw units as decimal text (they
            # outgrow BIGINT); `balance`: the account's running sum after it (NULL for
            # `external`); `block_number`: the block of the chain fact it records (NULL for
            # a fact off the chain, or history whose block is unknown: counted at every height)
            """CREATE TABLE journal (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                group_id TEXT NOT NULL,
                at TEXT NOT NULL,
                chain_id BIGINT NOT NULL,
                token TEXT NOT NULL,
                account TEXT NOT NULL,
                amount TEXT NOT NULL,
                balance TEXT,
                block_number BIGINT,
                kind TEXT NOT NULL,
                transfer_id TEXT,
                deposit_id TEXT,
                transaction_hash TEXT)""",
            # a balance at a time, a statement's window: one seek
            """CREATE INDEX journal_account
                ON journal (org_id, account, chain_id, token, at, id)""",
            # posted at a block: what came after it, per organization and chain
            """CREATE INDEX journal_block ON journal (org_id, chain_id, block_number)
                WHERE block_number IS NOT NULL""",
            "CREATE INDEX journal_transfer ON journal (transfer_id) WHERE transfer_id IS NOT NULL",
            # each group once (its id says which fact it records)
            """CREATE TABLE journal_groups (
                org_id TEXT NOT NULL,
                group_id TEXT NOT NULL,
                at TEXT NOT NULL,
                PRIMARY KEY (org_id, group_id)){clustered}""",
            # the running sums: each account's posted sum and the time of its last posting
            """CREATE TABLE journal_balances (
                org_id TEXT NOT NULL,
                account TEXT NOT NULL,
                chain_id BIGINT NOT NULL,
                token TEXT NOT NULL,
                posted TEXT NOT NULL,
                last_at TEXT NOT NULL,
                PRIMARY KEY (org_id, chain_id, account, token)){clustered}""",
            """CREATE TABLE reconciliation_runs (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                number BIGINT NOT NULL,
                chain_id BIGINT NOT NULL,
                at TEXT NOT NULL,
                block_number BIGINT NOT NULL,
                pairs BIGINT NOT NULL,
                tied_out BIGINT NOT NULL,
                in_flight BIGINT NOT NULL,
                breaks_open BIGINT NOT NULL)""",
            "CREATE UNIQUE INDEX reconciliation_runs_org ON reconciliation_runs (org_id, number)",
            "CREATE INDEX reconciliation_runs_chain ON reconciliation_runs (chain_id, at)",
            # amounts as raw decimal text with the token's decimals; `evidence`: JSON
            """CREATE TABLE reconciliation_breaks (
                id {pk},
                org_id TEXT NOT NULL REFERENCES organizations(id),
                number BIGINT NOT NULL,
                kind TEXT NOT NULL,
                chain_id BIGINT NOT NULL,
                wallet TEXT NOT NULL,
                token TEXT NOT NULL,
                decimals INTEGER NOT NULL,
                expected TEXT NOT NULL,
                actual TEXT NOT NULL,
                difference TEXT NOT NULL,
                block_number BIGINT NOT NULL,
                evidence TEXT NOT NULL,
                status TEXT NOT NULL,
                opened_at TEXT NOT NULL,
                resolved_at TEXT,
                resolved_by TEXT,
                note TEXT,
                UNIQUE (org_id, number))""",
            # one open break per (wallet, token, kind)
            """CREATE UNIQUE INDEX reconciliation_breaks_open
                ON reconciliation_breaks (org_id, chain_id, wallet, token, kind)
                WHERE status = 'open'""",
            # the (wallet, token) pairs that differed at the last run, with the block at
            # which each last tied out (NULL: never seen tied): where the evidence of its
            # difference is looked for (a pair that ties out has no row)
            """CREATE TABLE reconciliation_pairs (
                org_id TEXT NOT NULL,
                chain_id BIGINT NOT NULL,
                wallet TEXT NOT NULL,
                token TEXT NOT NULL,
                tied_block BIGINT,
                PRIMARY KEY (org_id, chain_id, wallet, token)){clustered}""",
            # a wallet's transfers that ended after a time: its reservations at that time
            """CREATE INDEX transfers_wallet_updated
                ON transfers (wallet_address, updated_at)""",
        ],
    ),
    (
        23,
        "payout runs: a transfer queued while its wallet had no room among its legs in"
        " flight (its place in the wallet's queue), and the queue by wallet",
        [
            # set when a transfer was accepted without its legs signed because its wallet
            # already had `max_in_flight` legs in flight: its place in the queue (the time
            # of acceptance, then its index in its batch), kept once it starts, so that a
            # refusal upstream fails it (it was announced) instead of forgetting it
            "ALTER TABLE transfers ADD COLUMN queued TEXT",
            """CREATE INDEX transfers_queue ON transfers (chain_id, wallet_address, queued)
                WHERE stage = 'queued'""",
        ],
    ),
    (
        24,
        "per-organization numbers from counters again, taken ahead of the create's"
        " transaction on PostgreSQL (numbers may skip there)",
        [
            # the last number each organization gave in each numbered table (no row:
            # the first create reads the table's own, `insert_numbered`)
            """CREATE TABLE numbers (
                org_id TEXT NOT NULL,
                name TEXT NOT NULL,
                last BIGINT NOT NULL,
                PRIMARY KEY (org_id, name)){clustered}""",
        ],
    ),
    (
        25,
        "audit events appended outside their chain on PostgreSQL, sealed into it by a job",
        [
            # an event committed with its change, not yet in its organization's chain:
            # `n` orders the sealing, which numbers and hashes it (`audit.seal`)
            """CREATE TABLE audit_pending (
                n {pk},
                org_id TEXT NOT NULL,
                id TEXT NOT NULL,
                at TEXT NOT NULL,
                actor TEXT NOT NULL,
                operation TEXT NOT NULL,
                object_type TEXT NOT NULL,
                object_id TEXT,
                status INTEGER NOT NULL,
                request_id TEXT)""",
            "CREATE INDEX audit_pending_org ON audit_pending (org_id, n)",
        ],
    ),
]
