"""The fiat provider interface: customers, bank accounts, on- and off-ramps, virtual accounts.

A fiat plugin speaks plain, provider-neutral types of its own (never the API's request
models) and the provider's transfer states by their names (``awaiting_funds``, ...,
``payment_processed``). Every call that creates something takes an idempotency key of
ours, so that repeating it (with the same request) after a crash or a timeout never
creates a second one.
Failures are `UpstreamError` (502), ``ambiguous=True`` when the request may have
reached the provider (a timeout after sending). Reads (`transfers`, `wallet_balance`)
change nothing: a provider simulated in the process moves its transfers only when told
to (`SimulatedProvider.advance`, which the worker calls once a pass).
`treasury.testing.fiat.FiatSuite` is the conformance suite.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

from ...errors import UpstreamError

if TYPE_CHECKING:
    from ..chain.base import Chain
    from ..storage.base import Storage

#: Provider transfer states that end a transfer for us (DESIGN §3 "Provider states map"):
#: processed, or one of the provider's exception paths. ``in_review`` and
#: ``missing_return_policy`` wait (for a review, for a return policy to be configured).
#: The provider's states (apidocs.bridge.xyz/platform/orchestration/transfers/transfer-states).
FAILED_STATES = frozenset(
    {
        "canceled",
        "error",
        "returned",
        "refund_in_flight",
        "refunded",
        "refund_failed",
        "undeliverable",
    }
)
FINAL_STATES = FAILED_STATES | {"payment_processed"}
#: The onboarding status of an approved customer.
APPROVED = "approved"


@dataclass(frozen=True)
class Onboarding:
    """Where a customer's onboarding stands: the provider's id for the customer, its
    status (the provider's KYC/KYB status name; ``approved`` once it may transact) and
    the hosted page where the business completes it (None where there is none)."""

    customer_id: str
    status: str
    url: str | None = None

    @property
    def approved(self) -> bool:
        return self.status == APPROVED


@dataclass(frozen=True)
class ExternalAccount:
    """A US bank account to register with the provider (DESIGN §3 "Bank accounts")."""

    bank_name: str
    account_owner_name: str
    account_owner_type: str  # "business"
    business_name: str | None
    account_number: str
    routing_number: str
    checking_or_savings: str  # "checking" | "savings"
    currency: str  # "usd"
    street_line_1: str
    street_line_2: str | None
    city: str
    state: str | None
    postal_code: str
    country: str  # ISO 3166-1 alpha-3, e.g. "USA"


@dataclass(frozen=True)
class BankDeposit:
    """Where a customer pushes USD (an on-ramp's or a virtual account's instructions)."""

    bank_name: str
    bank_address: str
    routing_number: str
    account_number: str
    beneficiary_name: str
    beneficiary_address: str
    message: str  # the reference the payment must carry


@dataclass(frozen=True)
class OnRamp:
    """USD pushed by ACH from a registered bank account, paid out as USDC to an address."""

    amount: str  # USD, a decimal string
    developer_fee: str  # USD, deducted from what the destination receives
    external_account_id: str  # the provider's id of the bank account
    chain_id: int
    to_address: str


@dataclass(frozen=True)
class OffRamp:
    """USDC sent from a wallet to the provider, paid out by ACH to a registered account."""

    amount: str  # USDC, a decimal string
    developer_fee: str
    external_account_id: str
    chain_id: int
    from_address: str


@dataclass(frozen=True)
class ProviderTransfer:
    """A transfer as the provider sees it."""

    id: str
    state: str  # the provider's state name
    bank_deposit: BankDeposit | None = None  # on-ramp: where the ACH is to be pushed
    deposit_address: str | None = None  # off-ramp: where the USDC is to be sent
    destination_tx_hash: str | None = None  # on-ramp: the payout's transaction
    final_amount: str | None = None  # what the destination receives, once known
    updated_at: datetime | None = None  # when the provider last changed it (its clock)


@dataclass(frozen=True)
class VirtualAccount:
    """A standing USD account whose deposits the provider turns into USDB in its wallet."""

    id: str
    customer_id: str
    wallet_id: str
    developer_fee_percent: str
    deposit: BankDeposit


@dataclass(frozen=True)
class FiatContext:
    """What the treasury gives a fiat plugin when it opens. `chain(chain_id)` returns the
    chain backend (the sandbox watches off-ramp deposits there, and pays on-ramps out
    where the chain is a test chain, `MintingChain`);
    `storage` is the treasury's store (migrated before first use), where a plugin that
    simulates a provider may keep its state (the sandbox's table ``sandbox_fiat``), sealed
    with `encryption_key` (32 bytes for this plugin alone, derived from the master key)."""

    chain: Callable[[int], Chain]
    storage: Storage | None = None
    encryption_key: bytes | None = field(default=None, repr=False)


class FiatProvider(ABC):
    @classmethod
    @abstractmethod
    def from_url(cls, url: str) -> Self: ...

    def bind(self, context: FiatContext) -> None:  # noqa: B027 (optional hook)
        """Called once by `Treasury.open`, before any other method."""

    @abstractmethod
    def create_customer(self, name: str, *, idempotency_key: str) -> str:
        """A business customer (one per organization); the provider's id for it."""

    def start_onboarding(
        self, name: str, *, idempotency_key: str, email: str | None = None
    ) -> Onboarding:
        """Create a business customer named `name` through the provider's hosted KYB
        flow (`email`: the business's contact, where the provider asks for one); the same
        key returns the same customer. A provider without onboarding approves at once."""
        return Onboarding(self.create_customer(name, idempotency_key=idempotency_key), APPROVED)

    def customer_status(self, customer_id: str) -> Onboarding:
        """Where the customer's onboarding stands now (approved where the provider has no
        onboarding)."""
        return Onboarding(customer_id, APPROVED)

    @abstractmethod
    def register_external_account(
        self, customer_id: str, account: ExternalAccount, *, idempotency_key: str
    ) -> str:
        """Register a bank account of a customer; the provider's id for it. The same key
        returns the same id without registering twice."""

    def deactivate_external_account(self, customer_id: str, account_id: str) -> None:
        """Deactivate a registered bank account at the provider (its details replaced
        by a new account, ``PUT /v1/bank-accounts/{id}``): no new transfer may use it.
        Safe to repeat. Default: refused (a provider that cannot deactivate accounts)."""
        raise UpstreamError("this fiat provider cannot deactivate an external account")

    @abstractmethod
    def create_transfer(
        self, customer_id: str, request: OnRamp | OffRamp, *, idempotency_key: str
    ) -> ProviderTransfer:
        """Start an on- or off-ramp; the same key returns the same transfer."""

    @abstractmethod
    def transfers(self, ids: Sequence[str]) -> list[ProviderTransfer]:
        """The current state of many transfers, in the order asked (one call, or a few),
        changing nothing. An id the provider does not know is an `UpstreamError` (a
        misconfigured or forgetful provider must not fail real transfers)."""

    def transfers_updated_since(self, when: datetime) -> Iterable[list[ProviderTransfer]] | None:
        """Pages of every transfer the provider changed after `when` (its own clock, as
        `ProviderTransfer.updated_at` shows it), so that a pass costs a request a page,
        not one per open transfer; None where the provider lists no such thing (the
        treasury then reads its open transfers by id)."""
        return None

    def cancel_transfer(self, transfer_id: str) -> ProviderTransfer | None:
        """Cancel a transfer that awaits funds (an off-ramp whose USDC will never come);
        the transfer as the provider then shows it, or None where the provider offers no
        cancellation. A transfer past awaiting_funds is not cancelled (its state is
        answered as it is)."""
        return None

    @abstractmethod
    def create_virtual_account(self, customer_id: str, *, idempotency_key: str) -> VirtualAccount:
        """A USD virtual account of the customer, paying out USDB to a provider wallet."""

    @abstractmethod
    def wallet_balance(self, customer_id: str, wallet_id: str) -> str:
        """The USDB balance of a customer's provider wallet, a decimal string."""


@runtime_checkable
class SimulatedProvider(Protocol):
    """A provider simulated in the process (the sandbox), whose time passes in steps:
    the worker calls `advance` with the transfers it is about to read, once a pass."""

    def advance(self, ids: Sequence[str]) -> None:
        """Move each open transfer of `ids` one state forward, as the provider's time
        passing would (ids it does not know are left to `transfers` to refuse)."""
        ...


def read_each(provider: FiatProvider, ids: Sequence[str]) -> list[ProviderTransfer | UpstreamError]:
    """The provider's view of each of `ids`, in order: one call (`FiatProvider.transfers`),
    or, where it refuses that call, one call an id, each refusal in its id's place (one id
    the provider refuses must not hold up the others)."""
    try:
        return list(provider.transfers(ids))
    except UpstreamError:
        found: list[ProviderTransfer | UpstreamError] = []
        for transfer_id in ids:
            try:
                (view,) = provider.transfers([transfer_id])
            except UpstreamError as refused:
                found.append(refused)
            else:
                found.append(view)
        return found
