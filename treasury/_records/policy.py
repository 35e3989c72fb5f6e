"""Each organization's policy (DESIGN §3 Controls), which the policy domain sets
(`treasury.policy.store`) and the transfers read at their claim: the approval threshold, the daily limit (in dollars: usd,
usdc, usdt and c0 count 1:1), which destinations are taken and how long a new one waits,
and the gas station (a managed wallet's id, stored for the transfers' gas rules). No row:
every control off. Also what "known" destinations are: the organization's managed and
virtual wallets at once; its tracked wallets and live recipients once their address has
been theirs for `destination_cooldown_hours` (DESIGN §3 "Controls, second round")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..backends.storage.base import Storage, Transaction

from .._infra.clock import to_text
from ..errors import Forbidden

Destinations = Literal["any", "known"]


@dataclass(frozen=True)
class Rules:
    """An organization's policy: None is a control that is off."""

    approval_threshold: Decimal | None = None
    daily_limit: Decimal | None = None
    destinations: Destinations = "any"
    #: Hours a recipient or tracked wallet, added or re-pointed, waits before it is a
    #: known destination (0: at once).
    destination_cooldown_hours: int = 24
    #: The id (number) of the managed wallet that pays gas, or None.
    gas_station: int | None = None

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
        "SELECT approval_threshold, daily_limit, destinations, destination_cooldown_hours,"
        " gas_station FROM policies WHERE org_id = ?",
        (org_id,),
    )
    if row is None:
        return OFF
    return Rules(
        approval_threshold=_decimal(row["approval_threshold"]),
        daily_limit=_decimal(row["daily_limit"]),
        destinations=row["destinations"],
        destination_cooldown_hours=int(row["destination_cooldown_hours"]),
        gas_station=None if row["gas_station"] is None else int(row["gas_station"]),
    )


def gas_station(source: Transaction | Storage, org_id: str) -> int | None:
    """The id (number) of the organization's gas station wallet, or None."""
    return read(source, org_id).gas_station


def known_destination(
    tx: Transaction, org_id: str, address: str, now: datetime, cooldown_hours: int
) -> bool:
    """Whether `address` (lowercase) is a known destination of the organization at `now`:
    one of its managed or virtual wallets, or a tracked wallet or live (not deleted)
    recipient whose address has been theirs for `cooldown_hours`."""
    settled = to_text(now - timedelta(hours=cooldown_hours))
    row = tx.one(
        "SELECT 1 AS known FROM wallets WHERE org_id = ? AND address = ? AND deleted_at IS NULL"
        " AND (type = 'managed' OR created_at <= ?)"
        " UNION ALL SELECT 1 AS known FROM virtual_wallets WHERE org_id = ? AND address = ?"
        " UNION ALL SELECT 1 AS known FROM recipients WHERE org_id = ? AND address = ?"
        " AND deleted_at IS NULL AND pointed_at <= ?",
        (org_id, address, settled, org_id, address, org_id, address, settled),
    )
    return row is not None


def managed_wallet(tx: Transaction, org_id: str, number: int) -> bool:
    """Whether `number` is a live managed wallet of the organization (a gas station)."""
    row = tx.one(
        "SELECT 1 AS found FROM wallets WHERE org_id = ? AND number = ? AND type = 'managed'"
        " AND deleted_at IS NULL",
        (org_id, number),
    )
    return row is not None


def guard_address_book(source: Transaction | Storage, org_id: str, admin: bool) -> None:
    """The address book is a control under ``destinations: "known"``: adding, re-pointing
    or deleting a recipient and tracking a wallet need scope ``admin`` (403 naming it)."""
    if not admin and read(source, org_id).destinations == "known":
        raise Forbidden(required_scope="admin")


def _decimal(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)
