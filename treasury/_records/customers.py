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
from ..backends.storage.base import Row, Storage, Transaction, one_row
from ..errors import NotFound, OnboardingIncomplete, ValidationError

#: The status shown before the provider has heard of the organization.
NOT_STARTED = "not_started"


def organization(source: Transaction | Storage, org_id: str) -> Row:
    """The organization's name, provider customer id and onboarding (read in the
    caller's transaction, or as one statement: `one_row`)."""
    row = one_row(
        source,
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
        known = organization(runtime.storage, org_id)
    if known["provider_customer_id"] and known["onboarding_status"] == "approved":
        return str(known["provider_customer_id"])
    found = onboarding(runtime, org_id, known, start=True)
    if not found.approved:
        raise OnboardingIncomplete(found.status, found.url, next_step=next_step(org_id, found))
    return found.customer_id


def next_step(org_id: str, found: Onboarding) -> str:
    """What the organization does next to finish its onboarding (`details.next` of the
    409): start it with the business's contact email, or complete the provider's KYB."""
    if not found.url:  # no link yet: the onboarding was not started
        return (
            "start the organization's fiat onboarding with the business's contact email:"
            f" treasury orgs onboard {org_id} --email EMAIL (or, in Python,"
            f" t.admin.start_onboarding({org_id!r}, email=...)), then complete the provider's"
            " KYB at the link it answers"
        )
    return f"complete the provider's KYB at {found.url}; fiat operations work once it is approved"


def start_onboarding(runtime: Runtime, org_id: str, email: str | None = None) -> Onboarding:
    """Create the organization's customer through the provider's hosted KYB link (once:
    concurrent calls ask the provider with the same idempotency key), or read where an
    onboarding already started stands."""
    with runtime.storage.read() as tx:
        known = organization(tx, org_id)
    return onboarding(runtime, org_id, known, start=True, email=email, asked=True)


def onboarding(
    runtime: Runtime,
    org_id: str,
    known: Row,
    *,
    start: bool,
    email: str | None = None,
    asked: bool = False,
) -> Onboarding:
    """Where the organization's onboarding stands, asked of the provider and kept. Not
    started: started when `start`, else reported as such. A provider that needs a
    contact email the call lacks: a 400 naming ``email`` when the onboarding was `asked`
    for (`start_onboarding`), else (a first fiat operation) left not started, which that
    operation's 409 says how to start (`next_step`)."""
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
            if email is not None or asked:
                raise
            return Onboarding("", NOT_STARTED, None)
    with runtime.storage.transaction() as tx:
        tx.execute(
            "UPDATE organizations SET provider_customer_id = COALESCE(provider_customer_id, ?),"
            " onboarding_status = ?, onboarding_url = ? WHERE id = ?",
            (found.customer_id, found.status, found.url, org_id),
        )
    return found
