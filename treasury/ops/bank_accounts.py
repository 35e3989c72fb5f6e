"""Bank accounts: registered with the fiat provider, numbers encrypted at rest."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from .._runtime import Scope
from .._validation import parse, parse_value
from ..backends.storage.base import Row
from ..errors import NotFound
from ..models.bank_accounts import BankAccount, BankAccountRow, CreateBankAccount
from ..models.common import ListOf

_NUMBER = "bank-account-number"
_ROUTING = "bank-routing-number"
_ADDRESS = "bank-account-address"
_COLUMNS = (
    "id, external_id, org_id, user_id, bank_name, business_name, account_owner_name,"
    " account_owner_type, account_type, currency, checking_or_savings, account_number_last4,"
    " routing_number, active, created_at, updated_at"
)


class BankAccounts:
    def __init__(self, scope: Scope):
        self._scope = scope

    def create(
        self, body: CreateBankAccount | Mapping[str, Any] | None = None, **fields: Any
    ) -> BankAccount:
        """Register the account with the fiat provider, then store it (numbers encrypted)."""
        request = parse(CreateBankAccount, body if body is not None else fields)
        runtime, scope = self._scope.runtime, self._scope
        external_id = str(uuid.uuid4())
        runtime.fiat.register_bank_account(external_id, request)
        box, now = runtime.secrets, runtime.now_text()
        with runtime.storage.transaction() as tx:
            row = tx.one(
                "INSERT INTO bank_accounts (external_id, org_id, user_id, bank_name, business_name,"
                " account_owner_name, account_owner_type, account_type, currency,"
                " checking_or_savings, account_number_last4, account_number, routing_number,"
                " address, active, created_at, updated_at)"
                f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?) RETURNING {_COLUMNS}",
                (
                    external_id,
                    scope.org_id,
                    scope.user_id,
                    request.bank_name,
                    request.business_name,
                    request.account_owner_name,
                    request.account_owner_type,
                    request.account_type,
                    request.currency,
                    request.checking_or_savings,
                    request.account.account_number[-4:],
                    box.encrypt(_NUMBER, request.account.account_number),
                    box.encrypt(_ROUTING, request.account.routing_number),
                    box.encrypt(_ADDRESS, request.address.model_dump_json()),
                    now,
                    now,
                ),
            )
        assert row is not None
        return BankAccount.model_validate(
            self._decrypted(row)
            | {
                "organization_id": row["org_id"],
                "provider_external_account_id": row["external_id"],
            }
        )

    def list(self) -> ListOf[BankAccountRow]:
        """Every bank account of the organization, oldest first; `id` is the uuid."""
        with self._scope.runtime.storage.read() as tx:
            rows = tx.query(
                f"SELECT {_COLUMNS} FROM bank_accounts WHERE org_id = ? ORDER BY id",
                (self._scope.org_id,),
            )
        return ListOf[BankAccountRow](data=[_row(self._decrypted(row)) for row in rows])

    def get(self, external_id: str) -> BankAccountRow:
        """One bank account by the uuid transfers use as `external_account_id`."""
        external_id = str(parse_value(uuid.UUID, external_id, "body", "external_account_id"))
        with self._scope.runtime.storage.read() as tx:
            row = tx.one(
                f"SELECT {_COLUMNS} FROM bank_accounts WHERE org_id = ? AND external_id = ?",
                (self._scope.org_id, external_id),
            )
        if row is None:
            raise NotFound("Bank account not found")
        return _row(self._decrypted(row))

    def _decrypted(self, row: Row) -> Row:
        routing = self._scope.runtime.secrets.decrypt(_ROUTING, row["routing_number"])
        return row | {"routing_number": routing, "active": bool(row["active"])}


def _row(row: Row) -> BankAccountRow:
    return BankAccountRow.model_validate(row | {"id": row["external_id"]})
