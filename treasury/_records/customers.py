"""Each organization is one customer of the fiat provider, onboarded through the
provider's hosted KYB flow (DESIGN §3 "Real backends"). The organizations table belongs
to admin; this reads and fills its customer id and onboarding status and link.

The one rule: a fiat operation (a bank account's registration, an on- or off-ramp, the
virtual account) needs an approved customer, `provider_customer`; until the provider
reports the customer approved it is `OnboardingIncomplete` (409, with the status and the
link). The first fiat operation of an organization starts its onboarding, as
`start_onboarding` does (a provider without onboarding, the sandbox, approves at once).
"""

from __future__ import annotations

from .._infra.runtime import Runtime
from ..backends.fiat.base import Onboarding
from ..backends.storage.base import Row, Transaction
from ..errors import NotFound, OnboardingIncomplete, ValidationError

#: The status shown before the provider has heard of the organization.
NOT_STARTED = "not_started"


def organization(tx: Transaction, org_id: str) -> Row:
    """The organization's name, provider customer id and onboarding (read in the
    caller's transaction)."""
    row = tx.one(
        "SELECT name, provider_customer_id, onboarding_status, onboarding_url"
        " FROM organizations WHERE id = ?",
        (org_id,),
    )
    if row is None:
        raise NotFound("Organization not found")
    return row


def provider_customer(runtime: Runtime, org_id: str, known: Row | None = None) -> str:
    """The provider's id of the organization's approved customer (`known`: its
    `organization` row, if the caller read it), else `OnboardingIncomplete`. Once
    approved, a read of our own row; before, one call to the provider."""
    if known is None:
        with runtime.storage.read() as tx:
            known = organization(tx, org_id)
    if known["provider_customer_id"] and known["onboarding_status"] == "approved":
        return str(known["provider_customer_id"])
    found = onboarding(runtime, org_id, known, start=True)
    if not found.approved:
        raise OnboardingIncomplete(found.status, found.url)
    return found.customer_id


def start_onboarding(runtime: Runtime, org_id: str, email: str | None = None) -> Onboarding:
    """Create the organization's customer through the provider's hosted KYB link (once:
    concurrent calls ask the provider with the same idempotency key), or read where an
    onboarding already started stands."""
    with runtime.storage.read() as tx:
        known = organization(tx, org_id)
    return onboarding(runtime, org_id, known, start=True, email=email)


def onboarding(
    runtime: Runtime, org_id: str, known: Row, *, start: bool, email: str | None = None
) -> Onboarding:
    """Where the organization's onboarding stands, asked of the provider and kept. Not
    started: started when `start` (a provider that needs a contact email the call lacks
    leaves it not started), else reported as such."""
    customer = known["provider_customer_id"]
    if customer:
        found = runtime.fiat.customer_status(str(customer))
    elif not start:
        return Onboarding("", NOT_STARTED, None)
    else:
        try:
            found = runtime.fiat.start_onboarding(
                known["name"], idempotency_key=f"customer-{org_id}", email=email
            )
        except ValidationError:
            if email is not None:
                raise
            return Onboarding("", NOT_STARTED, None)
    with runtime.storage.transaction() as tx:
        tx.execute(
            "UPDATE organizations SET provider_customer_id = COALESCE(provider_customer_id, ?),"
            " onboarding_status = ?, onboarding_url = ? WHERE id = ?",
            (found.customer_id, found.status, found.url, org_id),
        )
    return found
