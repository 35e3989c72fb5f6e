"""Publication from snapshots to the frozen artifact and the claims read from it."""

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
# sha256 of the artifact this version publishes for these snapshots (pinned when the
# artifact was built through a JSON round trip: the body must not change)
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
    with t._runtime.storage.read() as tx:
        body = store.artifact(tx, CHAIN, week)
    assert body is not None
    return t, week, body


def test_the_published_artifact_is_the_pinned_body(new_storage_url):
    t, _, body = published(new_storage_url("frozen.db"))
    assert hashlib.sha256(body.encode()).hexdigest() == PINNED
    t.close()
