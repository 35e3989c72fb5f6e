"""Of the transfers, what other domains read: the state table (whose open statuses the
nonces of signed legs are held by), and which transaction hashes our own transfers sent
per organization (the deposit detector leaves those out for it), the on-ramps still
open (a log that may be one's payout is held), and the fiat transfers the books compare
with the provider. The transfers domain writes them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..backends.storage.base import Transaction


#: A transfer's status, as the API shows it.
Status = Literal["pending", "submitted", "completed", "failed"]
#: How far a transfer's upstream work went (see `treasury.transfers.store`); ``awaiting``:
#: none, the transfer waits for its approval; ``queued``: none, it waits for room among
#: its wallet's legs in flight (`max_in_flight`).
Stage = Literal["awaiting", "queued", "claimed", "recorded"]
AWAITING: Stage = "awaiting"
QUEUED: Stage = "queued"
CLAIMED: Stage = "claimed"
RECORDED: Stage = "recorded"
#: Where a transfer stands with four-eyes approval (DESIGN §3 Controls).
ApprovalStatus = Literal["not_required", "awaiting", "approved", "rejected", "expired"]

#: The pairing of a transfer from a bank account into a wallet (`treasury.transfers.models`).
ONRAMP = "onramp"

#: The state table: the statuses a transfer may move to, from each status. Statements
#: take statuses, stages and pairings from here and from `treasury.transfers.models` (as
#: parameters, or as the SQL lists built here), never as literals of their own.
NEXT: dict[Status, frozenset[Status]] = {
    "pending": frozenset({"submitted", "failed"}),
    "submitted": frozenset({"completed", "failed"}),
    "completed": frozenset(),
    "failed": frozenset(),
}


def sql_list(values: Sequence[str]) -> str:
    """`values` as an SQL list of literals (they come from the tables above, never input)."""
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


#: The statuses of a transfer that has not ended (those it may still move from), as SQL.
OPEN = sql_list([status for status, after in NEXT.items() if after])


def caused(tx: Transaction, chain_id: int, hashes: Sequence[str]) -> dict[str, set[str]]:
    """Of `hashes`, those the service's transfers sent (a leg, or any signed version of
    one) or were paid by (an on-ramp's payout): each with the organizations whose
    transfers they are. "Its own transfers" is per organization: a log another
    organization's transfer caused is still a deposit of the organization it paid."""
    # imported here: this module's types (read by the typed client) need no SQL helper
    from .._infra.sql import in_chunks

    found: dict[str, set[str]] = {}
    for chunk, marks in in_chunks(hashes):
        rows = tx.query(
            f"SELECT l.hash AS hash, t.org_id AS org_id FROM transfer_legs l"
            f" JOIN transfers t ON t.id = l.transfer_id WHERE l.chain_id = ? AND l.hash IN ({marks})"
            f" UNION SELECT v.hash AS hash, t.org_id AS org_id FROM leg_versions v"
            f" JOIN transfers t ON t.id = v.transfer_id WHERE v.chain_id = ? AND v.hash IN ({marks})"
            f" UNION SELECT transaction_hash AS hash, org_id FROM transfers"
            f" WHERE chain_id = ? AND transaction_hash IN ({marks})",
            (chain_id, *chunk, chain_id, *chunk, chain_id, *chunk),
        )
        for row in rows:
            found.setdefault(str(row["hash"]), set()).add(str(row["org_id"]))
    return found


@dataclass(frozen=True)
class OpenOnramp:
    """An on-ramp not settled yet: the wallet it pays and the USDC amount (token units,
    a decimal string, as its destination shows it)."""

    id: str
    org_id: str
    address: str
    amount: Decimal


def open_onramps(tx: Transaction, chain_id: int, org_ids: Sequence[str]) -> list[OpenOnramp]:
    """The on-ramps of `org_ids` on a chain that have not ended (their payout may come)."""
    unique = sorted(set(org_ids))
    found: list[OpenOnramp] = []
    for begin in range(0, len(unique), 500):
        chunk = unique[begin : begin + 500]
        marks = ", ".join("?" * len(chunk))
        rows = tx.query(
            f"SELECT id, org_id, destination FROM transfers WHERE chain_id = ?"
            f" AND org_id IN ({marks}) AND pairing = ? AND status IN {OPEN}",
            (chain_id, *chunk, ONRAMP),
        )
        for row in rows:
            side = json.loads(row["destination"])
            if side.get("address") is None:
                continue
            found.append(
                OpenOnramp(
                    id=str(row["id"]),
                    org_id=str(row["org_id"]),
                    address=str(side["address"]).lower(),
                    amount=Decimal(str(side["amount"])),
                )
            )
    return found


@dataclass(frozen=True)
class AtProvider:
    """A recorded fiat transfer as the books compare it with the provider: the address
    it moves money from or to (`address`), its USDC `amount` (token units) and the
    provider's state as last recorded."""

    id: str
    pairing: str
    address: str
    amount: Decimal
    provider_transfer_id: str
    provider_state: str | None
    updated_at: str


def at_provider(
    tx: Transaction, org_id: str, chain_id: int, ids: Sequence[str]
) -> list[AtProvider]:
    """The organization's recorded fiat transfers on a chain that have not ended, and
    those of `ids` (the books hold money at the provider for them), by id."""
    columns = (
        "id, pairing, amount, wallet_address, destination, provider_transfer_id,"
        " provider_state, updated_at"
    )
    from .._infra.sql import in_chunks  # (as in `caused`)

    where = "org_id = ? AND chain_id = ? AND provider_transfer_id IS NOT NULL"
    rows = {
        str(row["id"]): row
        for row in tx.query(
            f"SELECT {columns} FROM transfers WHERE {where} AND status IN {OPEN}",
            (org_id, chain_id),
        )
    }
    for chunk, marks in in_chunks(set(ids) - set(rows)):
        for row in tx.query(
            f"SELECT {columns} FROM transfers WHERE {where} AND id IN ({marks})",
            (org_id, chain_id, *chunk),
        ):
            rows[str(row["id"])] = row
    found = []
    for transfer_id, row in sorted(rows.items()):
        address = row["wallet_address"] or json.loads(row["destination"]).get("address")
        found.append(
            AtProvider(
                id=transfer_id,
                pairing=str(row["pairing"]),
                address=str(address).lower(),
                amount=Decimal(str(row["amount"])),
                provider_transfer_id=str(row["provider_transfer_id"]),
                provider_state=row["provider_state"],
                updated_at=str(row["updated_at"]),
            )
        )
    return found


@dataclass(frozen=True)
class Reservation:
    """What a transfer holds of its source wallet until it is final: `raw` units of the
    token at `token` (its address) on `chain_id`."""

    transfer_id: str
    chain_id: int
    token: str
    raw: int


def reservations(tx: Transaction, org_id: str, wallet: str, at: str) -> list[Reservation]:
    """The reservations on `wallet` of the organization's transfers accepted before `at`
    and not final at `at`: open now, or ended after `at` (their last change)."""
    columns = "id, chain_id, reserve_token, reserve_raw"
    rows = tx.query(
        f"SELECT {columns} FROM transfers WHERE wallet_address = ? AND status IN {OPEN}"
        " AND org_id = ? AND created_at < ? AND reserve_raw IS NOT NULL"
        f" UNION SELECT {columns} FROM transfers WHERE wallet_address = ? AND updated_at > ?"
        f" AND status NOT IN {OPEN} AND org_id = ? AND created_at < ?"
        " AND reserve_raw IS NOT NULL",
        (wallet, org_id, at, wallet, at, org_id, at),
    )
    return [
        Reservation(
            str(r["id"]), int(r["chain_id"]), str(r["reserve_token"]), int(r["reserve_raw"])
        )
        for r in rows
    ]
