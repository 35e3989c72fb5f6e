"""Each organization is one customer of the fiat provider, created on first need (by a
bank account's registration, a virtual account or a fiat transfer, whichever comes
first). The organizations table belongs to admin; this reads and fills its customer id."""

from __future__ import annotations

from .._infra.runtime import Runtime
from ..backends.storage.base import Row, Transaction
from ..errors import NotFound


def organization(tx: Transaction, org_id: str) -> Row:
    """The organization's name and provider customer id (read in the caller's transaction)."""
    row = tx.one("SELECT name, provider_customer_id FROM organizations WHERE id = ?", (org_id,))
    if row is None:
        raise NotFound("Organization not found")
    return row


def provider_customer(runtime: Runtime, org_id: str, known: Row | None = None) -> str:
    """The provider's customer id of an organization (`known`: its `organization` row, if
    the caller read it). Created once: concurrent first calls ask the provider with the
    same idempotency key and store the same id."""
    if known is None:
        with runtime.storage.read() as tx:
            known = organization(tx, org_id)
    if known["provider_customer_id"]:
        return str(known["provider_customer_id"])
    customer = runtime.fiat.create_customer(known["name"], idempotency_key=f"customer-{org_id}")
    with runtime.storage.transaction() as tx:
        tx.execute(
            "UPDATE organizations SET provider_customer_id = ?"
            " WHERE id = ? AND provider_customer_id IS NULL",
            (customer, org_id),
        )
    return customer
