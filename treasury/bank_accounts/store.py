"""The bank_accounts domain's own statements on its table: a registration written ahead
of the provider's answer (``registering``, then ``registered``), the list, a look-up by
number or uuid and new details. Only registered rows are ever shown. What a transfer
reads of a bank account (its display fields and provider id) is in
`_records.bank_accounts`."""

from __future__ import annotations

from .._infra.sql import insert_numbered
from .._records.bank_accounts import REGISTERED as _REGISTERED
from ..backends.storage.base import Row, Transaction

COLUMNS = (
    "number, external_id, org_id, user_id, bank_name, business_name, account_owner_name,"
    " account_owner_type, account_type, currency, checking_or_savings, account_number_last4,"
    " routing_number, active, created_at, updated_at"
)


def insert_registering(
    tx: Transaction, org_id: str, external_id: str, values: dict[str, object], lease_until: str
) -> None:
    """The write-ahead row of a registration (`values`: column -> value)."""
    row = {"external_id": external_id, "state": "registering", "lease_until": lease_until}
    insert_numbered(tx, "bank_accounts", org_id, {**row, "active": 1, **values})


def registration(tx: Transaction, external_id: str) -> Row | None:
    """What the provider is to be told of a registration (sealed numbers included)."""
    return tx.one(
        "SELECT org_id, bank_name, business_name, account_owner_name, account_owner_type,"
        " currency, checking_or_savings, account_number, routing_number, address"
        " FROM bank_accounts WHERE external_id = ? AND state = 'registering'",
        (external_id,),
    )


def mark_registered(tx: Transaction, external_id: str, provider_id: str, now: str) -> Row | None:
    """Record the provider's answer (a no-op if it was recorded); the row as shown, or
    None if the registration was abandoned meanwhile."""
    tx.execute(
        "UPDATE bank_accounts SET state = 'registered', provider_account_id = ?,"
        " lease_until = NULL, updated_at = ? WHERE external_id = ? AND state = 'registering'",
        (provider_id, now, external_id),
    )
    return tx.one(f"SELECT {COLUMNS} FROM bank_accounts WHERE external_id = ?", (external_id,))


def remove_registering(tx: Transaction, external_id: str) -> None:
    tx.execute(
        "DELETE FROM bank_accounts WHERE external_id = ? AND state = 'registering'",
        (external_id,),
    )


def registered(tx: Transaction, org_id: str) -> list[Row]:
    return tx.query(
        f"SELECT {COLUMNS} FROM bank_accounts WHERE {_REGISTERED} ORDER BY number", (org_id,)
    )


def by_external_id(tx: Transaction, org_id: str, external_id: str) -> Row | None:
    return tx.one(
        f"SELECT {COLUMNS} FROM bank_accounts WHERE {_REGISTERED} AND external_id = ?",
        (org_id, external_id),
    )


def by_reference(tx: Transaction, org_id: str, reference: str) -> Row | None:
    """A registered account by the integer its creation answered or by its uuid, with
    its provider id."""
    column = "number" if reference.isdigit() else "external_id"
    value: object = int(reference) if reference.isdigit() else reference.lower()
    return tx.one(
        f"SELECT {COLUMNS}, provider_account_id FROM bank_accounts"
        f" WHERE {_REGISTERED} AND {column} = ?",
        (org_id, value),
    )


def replace_details(
    tx: Transaction, external_id: str, provider_id: str, values: dict[str, object], now: str
) -> Row | None:
    """New details of a registered account (`values`: column -> value, numbers sealed)
    and the provider's id of the account that now holds them; the row as shown."""
    assignments = "".join(f", {column} = ?" for column in values)
    tx.execute(
        f"UPDATE bank_accounts SET provider_account_id = ?, updated_at = ?{assignments}"
        " WHERE external_id = ? AND state = 'registered'",
        (provider_id, now, *values.values(), external_id),
    )
    return tx.one(
        f"SELECT {COLUMNS}, provider_account_id FROM bank_accounts WHERE external_id = ?",
        (external_id,),
    )
