"""Each organization is one customer of the fiat provider, created on first need."""

from __future__ import annotations

from .._infra.runtime import Runtime
from ..errors import NotFound


def provider_customer(runtime: Runtime, org_id: str) -> str:
    """The provider's customer id of an organization. Created once: concurrent first
    calls ask the provider with the same idempotency key and store the same id."""
    with runtime.storage.read() as tx:
        row = tx.one("SELECT name, provider_customer_id FROM organizations WHERE id = ?", (org_id,))
    if row is None:
        raise NotFound("Organization not found")
    if row["provider_customer_id"]:
        return str(row["provider_customer_id"])
    customer = runtime.fiat.create_customer(row["name"], idempotency_key=f"customer-{org_id}")
    with runtime.storage.transaction() as tx:
        tx.execute(
            "UPDATE organizations SET provider_customer_id = ?"
            " WHERE id = ? AND provider_customer_id IS NULL",
            (customer, org_id),
        )
    return customer
