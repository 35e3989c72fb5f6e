"""Bank accounts: registered with the fiat provider in two phases, numbers encrypted.

Registration is write-ahead (DESIGN §3 "Idempotency", two phases): the account is
stored ``registering`` (with its Idempotency-Key, if any) before the provider hears of
it; the provider is called outside any transaction with our uuid as its idempotency
key; then the row becomes ``registered``. A crash in between is finished by the
`finish_registrations` job with the same uuid, so the provider never holds an account
we do not know, and never two for one request.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from .._infra import idempotency
from .._infra.clock import to_text
from .._infra.crypto import SecretBox
from .._infra.group import Group
from .._infra.jobs import Report
from .._infra.models import ListOf
from .._infra.runtime import Runtime
from .._infra.sql import take_expired_leases
from .._infra.validation import parse_input, parse_value
from .._records.bank_accounts import ExternalIdRefused, parse_external_id
from .._records.customers import provider_customer
from ..backends.fiat.base import ExternalAccount
from ..backends.storage.base import Row, Transaction
from ..errors import NotFound
from . import store
from .models import (
    BankAccount,
    BankAccountRef,
    BankAccountRow,
    CreateBankAccount,
    PostalAddress,
    UpdateBankAccount,
)

_NUMBER = "bank-account-number"
_ROUTING = "bank-routing-number"
_ADDRESS = "bank-account-address"
_FINISHED_PER_PASS = 100


class BankAccounts(Group):
    name = "bank_accounts"

    def create(
        self,
        body: CreateBankAccount | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> BankAccount:
        """Register the account with the fiat provider and store it (numbers encrypted)."""
        request = parse_input(CreateBankAccount, body, fields)
        scope = self._scope

        def claim(tx: Transaction) -> str:
            external_id = str(uuid.uuid4())
            box, now = scope.runtime.secrets, scope.runtime.now()
            store.insert_registering(
                tx,
                scope.org_id,
                external_id,
                {
                    "user_id": scope.user_id,
                    "bank_name": request.bank_name,
                    "business_name": request.business_name,
                    "account_owner_name": request.account_owner_name,
                    "account_owner_type": request.account_owner_type,
                    "account_type": request.account_type,
                    "currency": request.currency,
                    "checking_or_savings": request.checking_or_savings,
                    "account_number_last4": request.account.account_number[-4:],
                    "account_number": box.encrypt(_NUMBER, request.account.account_number),
                    "routing_number": box.encrypt(_ROUTING, request.account.routing_number),
                    "address": box.encrypt(_ADDRESS, request.address.model_dump_json()),
                    "created_at": to_text(now),
                    "updated_at": to_text(now),
                },
                lease_until=to_text(now + idempotency.LEASE),
            )
            return external_id

        def prepare() -> Callable[[Transaction], str]:
            provider_customer(scope.runtime, scope.org_id)  # 409 until onboarded
            return claim

        return self._in_two_phases(
            "create",
            idempotency_key,
            request,
            prepare,
            _registration(scope.runtime),
            BankAccount,
        )

    def update(
        self,
        account_id: int | str,
        body: UpdateBankAccount | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> BankAccount:
        """Replace an account's details (``PUT /v1/bank-accounts/{id}``; `account_id` the
        integer its creation answered, or its uuid): the new details are registered with
        the provider as a new external account, the old one is deactivated there, and the
        row keeps its `id` and uuid, its `providerExternalAccountId` now the provider's new
        account. Transfers already handed to the provider keep the old account."""
        reference = parse_value(BankAccountRef, str(account_id), "path", "id")
        request = parse_input(UpdateBankAccount, body, fields)
        scope = self._scope
        runtime = scope.runtime

        def prepare() -> Callable[[Transaction], str]:
            with runtime.storage.read() as tx:
                row = store.by_reference(tx, scope.org_id, reference)
            if row is None:
                raise NotFound("Bank account not found")
            customer = provider_customer(runtime, scope.org_id)  # 409 until onboarded
            external_id, old = row["external_id"], row["provider_account_id"]
            account = replace(
                _account_of(row, request.address),
                account_number=request.account.account_number,
                routing_number=request.account.routing_number,
            )
            # the same Idempotency-Key registers the same new account at the provider
            key = f"{external_id}:{idempotency_key or uuid.uuid4()}"
            new = runtime.fiat.register_external_account(customer, account, idempotency_key=key)
            if old and old != new:
                runtime.fiat.deactivate_external_account(customer, str(old))
            box = runtime.secrets

            def write(tx: Transaction) -> str:
                store.replace_details(
                    tx,
                    external_id,
                    new,
                    {
                        "account_number_last4": request.account.account_number[-4:],
                        "account_number": box.encrypt(_NUMBER, request.account.account_number),
                        "routing_number": box.encrypt(_ROUTING, request.account.routing_number),
                        "address": box.encrypt(_ADDRESS, request.address.model_dump_json()),
                    },
                    runtime.now_text(),
                )
                return str(external_id)

            return write

        def record(tx: Transaction, external_id: str, _: None) -> BankAccount:
            row = store.by_reference(tx, scope.org_id, external_id)
            if row is None:
                raise NotFound("Bank account not found")
            return _created(row, runtime.secrets, provider_id=row["provider_account_id"])

        steps = idempotency.Upstream[None, BankAccount](
            perform=lambda _: None,  # the provider was told before the write (`prepare`)
            record=record,
            abandon=lambda tx, ref: None,
        )
        return self._in_two_phases(
            "update", idempotency_key, request, prepare, steps, BankAccount, (reference,)
        )

    def list(self) -> ListOf[BankAccountRow]:
        """Every bank account of the organization, oldest first; `id` is the uuid."""
        with self._scope.runtime.storage.read() as tx:
            rows = store.registered(tx, self._scope.org_id)
        box = self._scope.runtime.secrets
        return ListOf[BankAccountRow](data=[_listed(row, box) for row in rows])

    def get(self, external_id: str) -> BankAccountRow:
        """One bank account by the uuid transfers use as `external_account_id`."""
        try:
            external_id = parse_external_id(external_id)
        except ExternalIdRefused as refused:
            raise refused.at("body", "external_account_id") from None
        with self._scope.runtime.storage.read() as tx:
            row = store.by_external_id(tx, self._scope.org_id, external_id)
        if row is None:
            raise NotFound("Bank account not found")
        return _listed(row, self._scope.runtime.secrets)


def _registration(runtime: Runtime) -> idempotency.Upstream[str | None, BankAccount]:
    """Perform (tell the provider), record (mark registered), abandon (forget the row)."""

    def perform(external_id: str) -> str | None:
        with runtime.storage.read() as tx:
            row = store.registration(tx, external_id)
        if row is None:  # finished meanwhile by another worker: recording is a no-op
            return None
        account = _external_account(row, runtime.secrets)
        customer = provider_customer(runtime, row["org_id"])
        return runtime.fiat.register_external_account(
            customer, account, idempotency_key=external_id
        )

    def record(tx: Transaction, external_id: str, provider_id: str | None) -> BankAccount:
        row = store.mark_registered(tx, external_id, str(provider_id), runtime.now_text())
        if row is None:
            raise NotFound("Bank account not found")
        return _created(row, runtime.secrets)

    return idempotency.Upstream(perform=perform, record=record, abandon=store.remove_registering)


def finish_registrations(runtime: Runtime, report: Report) -> None:
    """Job: finish registrations whose request died (their lease has passed)."""
    now = runtime.now()
    with runtime.storage.transaction() as tx:
        taken = take_expired_leases(
            tx,
            "bank_accounts",
            "external_id",
            "state = 'registering'",
            to_text(now),
            to_text(now + idempotency.LEASE),
            _FINISHED_PER_PASS,
        )
    steps = _registration(runtime)
    for row in taken:
        with report.part(f"bank account {row['external_id']}"):
            idempotency.finish(runtime, row["org_id"], row["external_id"], steps)
            report.add(bank_accounts_registered=1)


def _external_account(row: Row, box: SecretBox) -> ExternalAccount:
    address = PostalAddress.model_validate_json(box.decrypt(_ADDRESS, row["address"]))
    return replace(
        _account_of(row, address),
        account_number=box.decrypt(_NUMBER, row["account_number"]),
        routing_number=box.decrypt(_ROUTING, row["routing_number"]),
    )


def _account_of(row: Row, address: PostalAddress) -> ExternalAccount:
    """The account of `row` at `address`, its numbers left for the caller to give."""
    return ExternalAccount(
        bank_name=row["bank_name"],
        account_owner_name=row["account_owner_name"],
        account_owner_type=row["account_owner_type"],
        business_name=row["business_name"],
        account_number="",
        routing_number="",
        checking_or_savings=row["checking_or_savings"],
        currency=row["currency"],
        street_line_1=address.street_line_1,
        street_line_2=address.street_line_2,
        city=address.city,
        state=address.state,
        postal_code=address.postal_code,
        country=address.country,
    )


def _shown(row: Row, box: SecretBox) -> Row:
    routing = box.decrypt(_ROUTING, row["routing_number"])
    return row | {"routing_number": routing, "active": bool(row["active"])}


def _created(row: Row, box: SecretBox, provider_id: str | None = None) -> BankAccount:
    """The creation response: `id` is the organization's number, the uuid is
    `providerExternalAccountId` (DESIGN §3); after a PUT, `provider_id`: the provider's
    id of the account that holds the new details."""
    return BankAccount.model_validate(
        _shown(row, box)
        | {
            "id": row["number"],
            "organization_id": row["org_id"],
            "provider_external_account_id": provider_id or row["external_id"],
        }
    )


def _listed(row: Row, box: SecretBox) -> BankAccountRow:
    return BankAccountRow.model_validate(_shown(row, box) | {"id": row["external_id"]})
