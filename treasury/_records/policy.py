"""Each organization's policy (DESIGN §3 Controls), which the policy domain sets and the
transfers read at their claim: the approval threshold, the daily limit (in dollars: usd,
usdc, usdt and c0 count 1:1) and which destinations are taken. No row: every control off.
Also what "known" destinations are: the organization's wallets (managed, tracked and
virtual) and its saved recipients."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..backends.storage.base import Storage, Transaction


Destinations = Literal["any", "known"]


@dataclass(frozen=True)
class Rules:
    """An organization's policy: None is a control that is off."""

    approval_threshold: Decimal | None = None
    daily_limit: Decimal | None = None
    destinations: Destinations = "any"

    def needs_approval(self, amount: Decimal) -> bool:
        """Whether a transfer of `amount` dollars waits for a second pair of eyes."""
        return self.approval_threshold is not None and amount >= self.approval_threshold


OFF = Rules()


def read(source: Transaction | Storage, org_id: str) -> Rules:
    """The organization's rules, in a transaction or as one statement (`one_row`)."""
    # imported here: this module's models (read by the typed client) need no storage
    from ..backends.storage.base import one_row

    row = one_row(
        source,
        "SELECT approval_threshold, daily_limit, destinations FROM policies WHERE org_id = ?",
        (org_id,),
    )
    if row is None:
        return OFF
    return Rules(
        approval_threshold=_decimal(row["approval_threshold"]),
        daily_limit=_decimal(row["daily_limit"]),
        destinations=row["destinations"],
    )


def write(tx: Transaction, org_id: str, rules: Rules, now: str) -> None:
    tx.execute(
        "INSERT INTO policies (org_id, approval_threshold, daily_limit, destinations,"
        " updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (org_id) DO UPDATE SET"
        " approval_threshold = excluded.approval_threshold,"
        " daily_limit = excluded.daily_limit, destinations = excluded.destinations,"
        " updated_at = excluded.updated_at",
        (
            org_id,
            _text(rules.approval_threshold),
            _text(rules.daily_limit),
            rules.destinations,
            now,
        ),
    )


def known_destination(tx: Transaction, org_id: str, address: str) -> bool:
    """Whether `address` (lowercase) is a wallet of the organization, of any type, or one
    of its saved recipients."""
    row = tx.one(
        "SELECT 1 AS known FROM wallets WHERE org_id = ? AND address = ? AND deleted_at IS NULL"
        " UNION ALL SELECT 1 AS known FROM virtual_wallets WHERE org_id = ? AND address = ?"
        " UNION ALL SELECT 1 AS known FROM recipients WHERE org_id = ? AND address = ?",
        (org_id, address, org_id, address, org_id, address),
    )
    return row is not None


def _decimal(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)


def _text(value: Decimal | None) -> str | None:
    return None if value is None else format(value.normalize(), "f")
