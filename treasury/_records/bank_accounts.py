"""The bank_accounts table, and how a transfer names and shows a bank account.

A row is written ``registering`` before the provider hears of the account (write-ahead),
and becomes ``registered`` once the provider answered; only registered rows are ever
shown. The bank_accounts domain registers and lists them; a transfer names one by its
uuid (`parse_external_id`) and shows it as a `BankAccountSummary`.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated

from pydantic import BeforeValidator, StringConstraints

from .._infra.models import Resource
from .._infra.sql import insert_numbered
from ..errors import ValidationError

if TYPE_CHECKING:
    from ..backends.storage.base import Row, Storage, Transaction

COLUMNS = (
    "number, external_id, org_id, user_id, bank_name, business_name, account_owner_name,"
    " account_owner_type, account_type, currency, checking_or_savings, account_number_last4,"
    " routing_number, active, created_at, updated_at"
)
_REGISTERED = "org_id = ? AND state = 'registered'"


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


def provider_account(source: Transaction | Storage, org_id: str, external_id: str) -> Row | None:
    """A registered account's display fields and its provider id, by our uuid (in a
    transaction or as one statement, `one_row`)."""
    # imported here: this module's models (read by the typed client) need no storage
    from ..backends.storage.base import one_row

    return one_row(
        source,
        "SELECT external_id, bank_name, account_owner_name, account_number_last4,"
        f" provider_account_id FROM bank_accounts WHERE {_REGISTERED} AND external_id = ?",
        (org_id, external_id),
    )


class BankAccountSummary(Resource):
    """The display fields a transfer side shows for a bank account."""

    id: str
    bank_name: str
    account_owner_name: str
    account_number_last4: str


#: What a transfer's `external_account_id` is, for the 400 that refuses anything else.
EXTERNAL_ID_HINT = (
    "must be a bank account's uuid: the `id` that GET /v1/bank-accounts lists, which is the"
    " creation answer's `providerExternalAccountId` (not its integer `id`)"
)


def _id_text(value: object) -> object:
    """An integer given as `external_account_id` reaches the uuid check (and its hint)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


ExternalAccountId = Annotated[str, BeforeValidator(_id_text), StringConstraints(max_length=64)]
"""A transfer's `external_account_id`: checked as a uuid by `parse_external_id`."""


def parse_external_id(value: object, field: str) -> str:
    """A bank account's uuid as transfers name it, or a 400 that says which id to give."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ValidationError.field("body", field, EXTERNAL_ID_HINT) from None
