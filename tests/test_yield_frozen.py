"""Publication from snapshots to the frozen artifact and the claims read from it.

The period is stored as rows (its row, its tree's dump, each holder's leaf with its
proof) and the API's body is assembled from them: the body served must stay the one
pinned when the API's body itself was stored, and a period stored that way (before the
rows) must read the same."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from treasury import Treasury
from treasury.backends.chain.devnet import DevnetChain
from treasury.yields import store
from treasury.yields.periods import bounds, period_of
from treasury.yields.publication import publish_period

from .conftest import MASTER_KEY

CHAIN = 31337
TUESDAY = datetime(2026, 11, 17, 9, 30, tzinfo=UTC)
APY = Decimal("0.037996417013592412378412409418367700563474706396432")  # 4.15 %, 50 digits
HOLDERS = {"0x" + c * 40: (int(c, 16) + 1) * 10**21 + 7 for c in "13579bdf"}
# sha256 of the body GET serves for these snapshots (pinned when the artifact was built
# through a JSON round trip and stored as that body: the body must not change)
PINNED = "933d9e9857ecdaccfdb4f938cab55a908d120f7512fdfb63d0ca6ed1f9572b80"


def published(storage_url: str) -> tuple[Treasury, int, str]:
    """A period published from three fixed snapshots; its frozen body."""
    now = [TUESDAY]
    t = Treasury.open(
        storage_url, master_key=MASTER_KEY, chains={CHAIN: DevnetChain()}, clock=lambda: now[0]
    )
    week = period_of(TUESDAY)
    end = bounds(week)[1]
    with t._runtime.storage.transaction() as tx:
        for hours, factor in ((-30, 1), (0, 2), (50, 3)):
            balances = {a: b * factor for a, b in HOLDERS.items()}
            store.add_snapshot(tx, CHAIN, TUESDAY + timedelta(hours=hours), APY, balances)
    now[0] = end + timedelta(minutes=5)
    assert publish_period(t._runtime, CHAIN, week)
    body = t.yield_artifacts.get(week, CHAIN).model_dump_json()  # as the blueprint sends it
    return t, week, body


def test_the_published_artifact_is_the_pinned_body(new_storage_url):
    t, _, body = published(new_storage_url("frozen.db"))
    assert hashlib.sha256(body.encode()).hexdigest() == PINNED
    t.close()


def test_the_tree_is_stored_without_proofs_and_a_whole_body_stored_earlier_reads_the_same(
    new_storage_url,
):
    t, week, body = published(new_storage_url("frozen.db"))
    with t._runtime.storage.transaction() as tx:
        row = store.artifact(tx, CHAIN, week)
        assert row is not None and "proof" not in row["artifact"]  # proofs: yield_leaves only
        tx.execute(  # as a period was stored before: the API's whole body
            "UPDATE yield_periods SET artifact = ? WHERE chain_id = ? AND period_id = ?",
            (body, CHAIN, week),
        )
    assert t.yield_artifacts.get(week, CHAIN).model_dump_json() == body
    t.close()
