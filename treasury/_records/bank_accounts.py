"""How a transfer names, reads and shows a bank account.

The bank_accounts domain registers, lists and updates them (`treasury.bank_accounts.store`:
a row is written ``registering`` before the provider hears of the account and becomes
``registered`` once it answered; only registered rows are ever shown). A transfer names
one by its uuid (`parse_external_id`), reads its provider id (`provider_account`) and
shows it as a `BankAccountSummary`.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated

from pydantic import BeforeValidator, StringConstraints

from .._infra.models import Resource
from ..errors import ValidationError

if TYPE_CHECKING:
    from ..backends.storage.base import Row, Storage, Transaction

REGISTERED = "org_id = ? AND state = 'registered'"


def provider_account(source: Transaction | Storage, org_id: str, external_id: str) -> Row | None:
    """A registered account's display fields and its provider id, by our uuid (in a
    transaction or as one statement, `one_row`)."""
    # imported here: this module's models (read by the typed client) need no storage
    from ..backends.storage.base import one_row

    return one_row(
        source,
        "SELECT external_id, bank_name, account_owner_name, account_number_last4,"
        f" provider_account_id FROM bank_accounts WHERE {REGISTERED} AND external_id = ?",
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


class ExternalIdRefused(ValidationError):
    """Not a bank account's uuid: a 400 that says which id to give and names no request
    field (the operation that read it names the field, `ValidationError.at`)."""


def parse_external_id(value: object) -> str:
    """A bank account's uuid as transfers name it, else `ExternalIdRefused`."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ExternalIdRefused(EXTERNAL_ID_HINT) from None
