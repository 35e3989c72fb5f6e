"""The policy domain's own statement on the policies table: setting an organization's
rules. What the transfers read of them at their claim (and the wallets and recipients
domains when they guard the address book) is in `_records.policy`."""

from __future__ import annotations

from decimal import Decimal

from .._records.policy import Rules
from ..backends.storage.base import Transaction


def write(tx: Transaction, org_id: str, rules: Rules, now: str) -> None:
    tx.execute(
        "INSERT INTO policies (org_id, approval_threshold, daily_limit, destinations,"
        " destination_cooldown_hours, gas_station, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (org_id) DO UPDATE SET"
        " approval_threshold = excluded.approval_threshold,"
        " daily_limit = excluded.daily_limit, destinations = excluded.destinations,"
        " destination_cooldown_hours = excluded.destination_cooldown_hours,"
        " gas_station = excluded.gas_station, updated_at = excluded.updated_at",
        (
            org_id,
            _text(rules.approval_threshold),
            _text(rules.daily_limit),
            rules.destinations,
            rules.destination_cooldown_hours,
            rules.gas_station,
            now,
        ),
    )


def _text(value: Decimal | None) -> str | None:
    return None if value is None else format(value.normalize(), "f")
