"""The servers of scale.py, each under gunicorn as ``treasury serve --processes N`` runs it.

    python benchmarks/_gunicorn.py treasury CONFIG_TOML --port P [--workers N] [--threads T]
    python benchmarks/_gunicorn.py bare POSTGRES_URL --port P [--workers N] [--threads T]

``treasury``: the library's own gunicorn application (``treasury.cli._processes.Processes``,
what ``serve --processes N --no-worker`` runs: every worker opens its own treasury of the
settings after the fork) with the options ``serve`` passes it. It is started here rather
than through ``serve`` because ``serve --processes 1`` serves with waitress, not gunicorn:
one process against two must be the same server.

``bare``: the floor of scale.py's recipients figure under the same gunicorn options: a
Flask app whose one endpoint, ``POST /v1/recipients``, parses the JSON body, does one
``INSERT … RETURNING number`` of a row of the shape of treasury's ``recipients`` table
(`PG_FLOOR_SCHEMA`) on a connection of a ``psycopg_pool.ConnectionPool`` opened in each
worker (autocommit: the statement commits, durably, in one round trip) and returns the
row as JSON with 201. Its number comes from an in-process counter (`FloorNumbers`).
Its ``POST /v1/transfers`` is the floor of an on-ramp, on a database treasury migrated
(`onramp_floor`): the durable writes an on-ramp makes, each of its two transactions sent
in one pipeline (one round trip): the claim (the ``transfers`` row and the
``idempotency_keys`` row in flight) and the record (the transfer's stage and provider
ids, its event, the key done). No checks, no provider call (the sandbox's own writes
are not treasury's). ``POST /v1/bank-accounts`` answers an id and writes nothing (the
load registers one before its window).

Not a benchmark; gunicorn logs on stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from gunicorn.app.base import BaseApplication

# The floor's tables on PostgreSQL: treasury's `recipients` as its migrations leave it
# (treasury/_infra/migrations.py, migration 6, spelled as PostgresStorage spells it: an
# identity primary key, the label in code-point order), with the foreign key to
# `organizations`, the unique index on (org_id, number) and the partial unique index on
# (org_id, address) of live rows. No `deleted_at` is ever written; no numbers table.
PG_FLOOR_SCHEMA = (
    """CREATE TABLE organizations (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at TEXT NOT NULL)""",
    """CREATE TABLE recipients (
        org_id TEXT NOT NULL REFERENCES organizations(id),
        number BIGINT NOT NULL,
        address TEXT NOT NULL,
        label TEXT COLLATE "C" NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        deleted_at TEXT,
        PRIMARY KEY (org_id, number))""",
    """CREATE UNIQUE INDEX recipients_live_address
        ON recipients (org_id, address) WHERE deleted_at IS NULL""",
)
PG_FLOOR_INSERT = (
    "INSERT INTO recipients (org_id, number, address, label, created_at, updated_at)"
    " VALUES (%s, %s, %s, %s, %s, %s) RETURNING number"
)
#: An on-ramp's claim and record (see `onramp_floor`), each one transaction.
ONRAMP_CLAIM = (
    "INSERT INTO transfers (id, org_id, pairing, status, stage, amount, developer_fee,"
    " source, destination, chain_id, bank_account_id, lease_until, created_at, updated_at)"
    " VALUES (%s, %s, 'onramp', 'pending', 'claimed', %s, '0', %s, %s, 31337, %s, %s, %s, %s)",
    "INSERT INTO idempotency_keys (org_id, key, fingerprint, state, resource, created_at,"
    " expires_at) VALUES (%s, %s, %s, 'in_flight', %s, %s, %s)",
)
ONRAMP_RECORD = (
    "UPDATE transfers SET stage = 'awaiting_funds', provider_transfer_id = %s,"
    " provider_state = 'awaiting_funds', deposit_instructions = %s, updated_at = %s"
    " WHERE id = %s AND stage = 'claimed'",
    "INSERT INTO events (org_id, type, payload, created_at) VALUES (%s, %s, %s, %s)",
    "UPDATE idempotency_keys SET state = 'done', body = %s"
    " WHERE org_id = %s AND resource = %s AND state = 'in_flight'",
)
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def options(port: int, workers: int, threads: int) -> dict[str, Any]:
    """gunicorn's settings as `treasury serve --processes N` gives them (its defaults:
    --connection-limit 1000, --channel-timeout 30), on 127.0.0.1:`port`."""
    return {
        "bind": f"127.0.0.1:{port}",
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        "worker_connections": 1000,
        "keepalive": 30,
        "timeout": 30,
        "accesslog": None,
        "control_socket_disable": True,
    }


class Bare(BaseApplication):  # type: ignore[misc]  # gunicorn has no types
    """The floor under gunicorn: each worker opens its own pool after the fork."""

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        self._url, self._settings = url, settings
        super().__init__()

    def load_config(self) -> None:
        for name, value in self._settings.items():
            if name in self.cfg.settings:
                self.cfg.set(name, value)

    def load(self) -> WSGIApp:
        return bare_app(self._url, pool_max=max(10, self._settings["threads"]))


def bare_app(url: str, *, pool_max: int, connection_class: Any = None) -> WSGIApp:
    from _common import FLOOR_ORG_ID, FloorNumbers, now_text
    from flask import Flask, Response, jsonify, request
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=pool_max,
        kwargs={"autocommit": True},
        **({} if connection_class is None else {"connection_class": connection_class}),
    )
    numbers = FloorNumbers()
    app = Flask("bare")

    @app.post("/v1/recipients")
    def create() -> tuple[Response, int]:
        body = request.get_json()
        now = now_text()
        number = numbers.next()
        values = (FLOOR_ORG_ID, number, body["address"], body["label"], now, now)
        with pool.connection() as conn:
            row = conn.execute(PG_FLOOR_INSERT, values).fetchone()
        assert row is not None
        return jsonify(
            {
                "id": row[0],
                "number": number,
                "address": body["address"].lower(),
                "label": body["label"],
                "createdAt": now,
                "updatedAt": now,
            }
        ), 201

    @app.post("/v1/bank-accounts")
    def bank_account() -> tuple[Response, int]:
        return jsonify({"providerExternalAccountId": str(uuid.uuid4())}), 201

    @app.post("/v1/transfers")
    def onramp() -> tuple[Response, int]:
        body = request.get_json()
        now, transfer_id = now_text(), str(uuid.uuid4())
        key = request.headers["Idempotency-Key"]
        source, destination = json.dumps(body["source"]), json.dumps(body["destination"])
        claim = (
            (
                transfer_id,
                FLOOR_ORG_ID,
                body["amount"],
                source,
                destination,
                body["source"]["external_account_id"],
                now,
                now,
                now,
            ),
            (FLOOR_ORG_ID, key, hashlib.sha256(request.data).hexdigest(), transfer_id, now, now),
        )
        answer = {
            "id": transfer_id,
            "status": "pending",
            "amount": body["amount"],
            "source": body["source"],
            "destination": body["destination"],
            "createdAt": now,
            "updatedAt": now,
        }
        instructions = json.dumps({"bank": "sandbox", "reference": transfer_id[:8]})
        record = (
            (str(uuid.uuid4()), instructions, now, transfer_id),
            (FLOOR_ORG_ID, "transfer.created", json.dumps(answer), now),
            (json.dumps(answer), FLOOR_ORG_ID, transfer_id),
        )
        with pool.connection() as conn:
            for statements, values in ((ONRAMP_CLAIM, claim), (ONRAMP_RECORD, record)):
                with conn.pipeline():
                    conn.execute("BEGIN")
                    for statement, params in zip(statements, values, strict=True):
                        conn.execute(statement, params)
                    conn.execute("COMMIT")
        return jsonify(answer), 201

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("app", choices=["treasury", "bare"])
    parser.add_argument("target", help="treasury: a TOML settings file; bare: a PostgreSQL URL")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    settings = options(args.port, args.workers, args.threads)
    if args.app == "bare":
        Bare(args.target, settings).run()
        return 0
    from treasury.cli._processes import Processes
    from treasury.config import Settings

    Processes(
        Settings.load(env={}, toml_file=args.target),
        settings,
        jobs_every=None,  # --no-worker: no background jobs in the API processes
        on_pass=lambda summary: None,
        trusted_proxy=None,
    ).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
