"""What one request costs PostgreSQL and Redis, pinned: the statements and round trips of
``POST /v1/recipients`` and of an on-ramp (``POST /v1/transfers``), counted by the
connections' own cursors, and the commands the rate limiter sends, as the Redis server's
MONITOR sees them. A change that adds one fails here: lower the numbers when a change
saves one, raise them only with a reason recorded in docs/decisions.md."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from treasury import Treasury
from treasury.backends.storage.postgresql import PostgresStorage
from treasury.http import create_app
from treasury.testing.round_trips import Census

from .conftest import MASTER_KEY, on_postgres, require_redis
from .helpers import BANK_ACCOUNT, address, onramp

pytestmark = pytest.mark.skipif(not on_postgres(), reason="PostgreSQL's round trips")

REDIS_DB = 9  # the rate limiter's counters in this module: a database of their own


CENSUS = Census()


@contextmanager
def redis_commands(url: str, key_id: str) -> Iterator[list[str]]:
    """The commands the rate limiter's connections sent in the block (those of every
    connection that sent a command naming `key_id`), from the server's MONITOR."""
    import redis

    server = redis.Redis.from_url(url)
    lines: list[dict[str, Any]] = []
    marker = "end-" + secrets.token_hex(4)
    ready = threading.Event()

    def watch() -> None:
        with server.monitor() as monitor:
            ready.set()
            while True:
                line = monitor.next_command()
                if marker in line["command"]:
                    return
                lines.append(line)

    watcher = threading.Thread(target=watch)
    watcher.start()
    ready.wait(5)
    seen: list[str] = []
    try:
        yield seen
    finally:
        server.echo(marker)
        watcher.join(10)
    ours = {line["client_port"] for line in lines if key_id in line["command"]}
    seen += [
        line["command"].split()[0]
        for line in lines
        if line["client_type"] != "lua" and line["client_port"] in ours
    ]


@pytest.fixture(scope="module")
def env(module_storage_url: str) -> Iterator[dict[str, Any]]:
    from treasury.backends.chain.devnet import DevnetChain

    redis_url = require_redis().rsplit("/", 1)[0] + f"/{REDIS_DB}"
    storage = PostgresStorage(module_storage_url, connection_class=CENSUS.connection_class())
    t = Treasury.open(
        storage,
        master_key=MASTER_KEY,
        fiat="sandbox://",
        chains={31337: DevnetChain()},
        rate_limit="1000000/1 second",
        rate_limit_storage=redis_url,
    )
    org = t.admin.create_organization("Acme")
    key = t.admin.create_api_key(org.id, user_id="u")
    api = create_app(t).test_client()
    headers = {"x-api-key": key.secret}
    answer = api.post(
        "/v1/bank-accounts", json=BANK_ACCOUNT, headers={**headers, "Idempotency-Key": "bank"}
    )
    assert answer.status_code == 201, answer.get_json()
    bank = answer.get_json()["providerExternalAccountId"]
    yield {"api": api, "headers": headers, "bank": bank, "key_id": key.id, "redis": redis_url}
    t.close()


def measured(
    env: dict[str, Any], path: str, body: Callable[[], dict[str, Any]]
) -> tuple[Census, list[str]]:
    """One warm-up request, then the counts of one more."""
    api, headers = env["api"], env["headers"]
    answer = api.post(path, json=body(), headers={**headers, "Idempotency-Key": "w" + path})
    assert answer.status_code == 201, answer.get_json()
    CENSUS.clear()
    with redis_commands(env["redis"], env["key_id"]) as commands:
        answer = api.post(path, json=body(), headers={**headers, "Idempotency-Key": "m" + path})
    assert answer.status_code == 201, answer.get_json()
    return Census(list(CENSUS.statements), CENSUS.round_trips), commands


def test_a_recipient_costs_two_round_trips_and_one_redis_call(env):
    seen, commands = measured(
        env, "/v1/recipients", lambda: {"address": address(), "label": "Payee"}
    )
    # the organization's numbering counter advanced in a transaction of its own (BEGIN,
    # the counter, COMMIT), then BEGIN and the INSERT (one message: its answer is the
    # recipient); the key (an expired holder's DELETE, the INSERT), the audit event
    # (pending: a worker seals it into the chain) and COMMIT (one message, whose answers
    # nobody waits for). The API key's row is this process's for 5 seconds.
    assert (len(seen.statements), seen.round_trips) == (9, 2), seen.statements
    assert commands == ["EVALSHA"]


def test_an_onramp_costs_pinned_round_trips_and_one_redis_call(env):
    seen, commands = measured(env, "/v1/transfers", lambda: onramp(env["bank"], address(), "5"))
    # checks: the policy, the key, the onboarding, the bank account (one statement each);
    # the claim (BEGIN, the organization's lock, the policy under it, the transfer, the
    # key; COMMIT); the provider call's reads (a snapshot of three); the sandbox provider
    # keeps its own state in the same database (6 statements, 5 round trips: a real
    # provider is an HTTPS call instead); the record (13 statements, 12 round trips: with
    # the event's `sequence`, taken from the organization's counter in the change's
    # transaction, and the transfer read as it stands for the books' posting of the
    # provider's state) and its audit event (pending, sealed by a worker; with the COMMIT).
    assert (len(seen.statements), seen.round_trips) == (37, 31), seen.statements
    assert commands == ["EVALSHA"]


def test_one_organization_s_recipients_at_once_hold_its_rows_only_at_the_ends(env):
    """Eight recipients of one organization at once, as `benchmarks/scale.py`'s one
    organization sends them: each costs what one alone costs (9 statements, 2 round
    trips), and nothing of the organization's is locked past a statement: its counter
    advances in a transaction committed in the first message, its audit event waits
    outside the chain (its head is never touched) until a worker seals it."""
    api, headers = env["api"], env["headers"]

    def create(i: int) -> None:
        body = {"address": address(), "label": "Payee"}
        answer = api.post(
            "/v1/recipients", json=body, headers={**headers, "Idempotency-Key": f"o{i}"}
        )
        assert answer.status_code == 201, answer.get_json()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(8)))
    CENSUS.clear()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(8, 16)))
    # each message's text (its statements' count from its separators: the threads'
    # answers interleave); a pooled connection new to a statement prepares it first, in
    # a message of its own
    texts = [text for text in CENSUS.statements if not text.startswith("(statement")]
    ours = [text for text in texts if "PREPARE treasury_" not in text]
    assert (sum(text.count("; ") + 1 for text in ours), len(ours)) == (8 * 9, 8 * 2)
    firsts = [text for text in ours if "COMMIT; BEGIN ISOLATION" in text]
    assert len(firsts) == 8 and all(
        text[2:].startswith("BEGIN; EXECUTE") and "audit_heads" not in text for text in firsts
    ), firsts
    lasts = [text for text in ours if text not in firsts]
    assert len(lasts) == 8 and all(text[:-1].endswith("; COMMIT") for text in lasts), lasts
    assert not any("audit_heads" in text for text in ours)
