"""The transfers feed: keyset pages that partition it, newest first; cursors that cannot be
forged, moved to another organization, or tampered with."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treasury import Treasury
from treasury.http import create_app
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, address, onramp


@pytest.fixture(scope="module")
def world(module_storage_url):
    """A treasury whose clock the tests move (equal timestamps happen on purpose)."""
    now = [datetime(2026, 9, 1, tzinfo=UTC)]
    t = Treasury.open(module_storage_url, master_key=MASTER_KEY, clock=lambda: now[0])
    yield t, now
    t.close()


def fresh_org(t: Treasury):
    tenant = make_tenant(t, f"Org {secrets.token_hex(3)}")
    bank = tenant.org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
    return tenant, bank


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(st.sampled_from([0, 0, 1, 2]), min_size=0, max_size=25),
    limits=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=5),
)
def test_property_pages_partition_the_feed_newest_first(world, steps, limits):
    t, now = world
    tenant, bank = fresh_org(t)
    made = []
    for seconds in steps:  # 0: the same microsecond as the previous transfer
        now[0] += timedelta(seconds=seconds)
        made.append(
            tenant.org.transfers.create(
                onramp(bank, address(), "1"), idempotency_key=secrets.token_hex(8)
            )
        )
    expected = [x.id for x in sorted(made, key=lambda x: (x.created_at, x.id), reverse=True)]
    seen, cursor, turn = [], None, 0
    while True:
        page = tenant.org.transfers.list(limit=limits[turn % len(limits)], cursor=cursor)
        assert page.count == len(page.data) <= limits[turn % len(limits)]
        seen += [x.id for x in page.data]
        turn += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == expected  # every transfer once, in order: no duplicate, no gap


def test_bad_foreign_and_tampered_cursors_are_400(world):
    t, now = world
    mine, bank = fresh_org(t)
    theirs, their_bank = fresh_org(t)
    for org, account in ((mine.org, bank), (theirs.org, their_bank)):
        for _ in range(3):
            now[0] += timedelta(seconds=1)
            org.transfers.create(
                onramp(account, address(), "1"), idempotency_key=secrets.token_hex(8)
            )
    their_cursor = theirs.org.transfers.list(limit=1).next_cursor
    my_cursor = mine.org.transfers.list(limit=1).next_cursor
    assert their_cursor and my_cursor
    payload, tag = my_cursor.split(".")
    flipped = ("A" if payload[0] != "A" else "B") + payload[1:]
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": mine.secret}) as api,
    ):
        assert api.get("/v1/transfers", params={"limit": 1, "cursor": my_cursor}).status_code == 200
        for bad in (their_cursor, f"{flipped}.{tag}", my_cursor[:-3], "garbage", "a.b.c", ""):
            r = api.get("/v1/transfers", params={"limit": 1, "cursor": bad})
            assert r.status_code == 400, bad
            assert r.json()["details"]["fields"][0]["field"] == "cursor"
        for limit in (0, 201, -1, "x"):
            r = api.get("/v1/transfers", params={"limit": limit})
            assert r.status_code == 400 and r.json()["details"]["fields"][0]["field"] == "limit"
