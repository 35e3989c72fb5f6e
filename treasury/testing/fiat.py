"""The fiat conformance suite: what every `FiatProvider` must get right.

Subclass `FiatSuite` in a test module and provide a ``fiat`` fixture that yields a fresh
provider (a sandbox account, a test tenant of the provider's API, ...) and a ``settle``
fixture: a function that makes an off-ramp's deposit arrive (send ``request.amount`` USDC
to ``transfer.deposit_address`` on ``request.chain_id``)::

    import pytest
    from treasury.testing.fiat import FiatSuite

    class TestMyFiat(FiatSuite):
        chain_id = 31337  # the chain the suite's transfers name

        @pytest.fixture
        def fiat(self):
            provider = MyFiat.from_url(...)
            yield provider

        @pytest.fixture
        def settle(self, my_chain):
            return lambda transfer, request: my_chain.faucet(
                transfer.deposit_address, "USDC", request.amount
            )

A provider that onboards its customers before they may transact (a hosted KYB link)
also gets an ``approve`` fixture: a function of a customer id that approves it, as the
provider's sandbox simulates (the default approves nothing: the provider approves at
once).

Every test uses fresh idempotency keys, so ``fiat`` may be shared by a whole module.
Between two reads of a transfer's state the suite lets the provider's time pass
(`pass_time`): a `SimulatedProvider` (the sandbox) is stepped, as the worker does once a
pass; any other provider moves on its own. Reads themselves must change nothing.
"""

from __future__ import annotations

import functools
import re
import secrets
import threading
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal

import pytest

from treasury.backends.fiat.base import (
    BankDeposit,
    ExternalAccount,
    FiatProvider,
    OffRamp,
    OnRamp,
    ProviderTransfer,
    SimulatedProvider,
)
from treasury.bank_accounts.models import aba_checksum_ok
from treasury.testing._support import run_threads

#: Makes an off-ramp's deposit arrive at the provider (see the module's docstring).
Settle = Callable[[ProviderTransfer, OffRamp], None]
#: The provider states a transfer goes through, in order.
PROGRESS = ("awaiting_funds", "funds_received", "payment_submitted", "payment_processed")
#: Reads within which a transfer whose funds have arrived must be processed.
MAX_READS = 10
#: The contact email the suite onboards its customers with.
EMAIL = "treasury@example.com"
#: Approves a customer (see the module's docstring).
Approve = Callable[[str], None]

ACCOUNT = ExternalAccount(
    bank_name="First Bank of Testing",
    account_owner_name="Jane Doe",
    account_owner_type="business",
    business_name="Acme Inc",
    account_number="000123456789",
    routing_number="021000021",
    checking_or_savings="checking",
    currency="usd",
    street_line_1="1 Main St",
    street_line_2="Suite 200",
    city="New York",
    state="NY",
    postal_code="10001",
    country="USA",
)
OTHER_ACCOUNT = ExternalAccount(
    bank_name="Second Bank of Testing",
    account_owner_name="John Roe",
    account_owner_type="business",
    business_name="Beta LLC",
    account_number="000987654321",
    routing_number="021000021",
    checking_or_savings="savings",
    currency="usd",
    street_line_1="2 Broadway",
    street_line_2=None,
    city="New York",
    state="NY",
    postal_code="10004",
    country="USA",
)


def new_key() -> str:
    """A fresh idempotency key, as the treasury makes them (a uuid)."""
    return str(uuid.uuid4())


def _address() -> str:
    return "0x" + secrets.token_hex(20)


def _check_bank_deposit(deposit: BankDeposit | None) -> None:
    assert deposit is not None
    assert re.fullmatch(r"[0-9]{9}", deposit.routing_number)
    assert aba_checksum_ok(deposit.routing_number)
    assert deposit.account_number.strip() and deposit.bank_name.strip()


class FiatSuite:
    """Conformance tests for a `FiatProvider`; subclasses provide the ``fiat`` fixture."""

    #: The chain id the suite's transfers name.
    chain_id = 31337

    @pytest.fixture
    def approve(self) -> Approve:
        """Subclasses whose provider onboards customers provide it (see the module doc)."""
        return lambda customer_id: None

    @pytest.fixture
    def customer(self, fiat: FiatProvider, approve: Approve) -> str:
        """A fresh business customer of the provider, onboarded and approved."""
        started = fiat.start_onboarding("Acme Inc", idempotency_key=new_key(), email=EMAIL)
        if not started.approved:
            approve(started.customer_id)
        assert fiat.customer_status(started.customer_id).approved
        return started.customer_id

    @pytest.fixture
    def account(self, fiat: FiatProvider, customer: str) -> str:
        """A bank account of `customer`, registered."""
        return fiat.register_external_account(customer, ACCOUNT, idempotency_key=new_key())

    @pytest.fixture
    def settle(self) -> Settle:
        """Subclasses provide it: make an off-ramp's USDC arrive at its deposit address."""
        raise NotImplementedError("provide a settle fixture (see treasury.testing.fiat)")

    def pass_time(self, fiat: FiatProvider, ids: Sequence[str]) -> None:
        """What happens between two reads: a simulated provider takes a step."""
        if isinstance(fiat, SimulatedProvider):
            fiat.advance(ids)

    def onramp(self, account: str, amount: str = "100", fee: str = "1.5") -> OnRamp:
        return OnRamp(amount, fee, account, self.chain_id, _address())

    def offramp(self, account: str, amount: str = "40", fee: str = "0.25") -> OffRamp:
        return OffRamp(amount, fee, account, self.chain_id, _address())

    def test_a_customer_is_created_once_per_key(self, fiat: FiatProvider) -> None:
        key = new_key()
        first = fiat.create_customer("Acme Inc", idempotency_key=key)
        assert isinstance(first, str) and first
        assert fiat.create_customer("Acme Inc", idempotency_key=key) == first
        assert fiat.create_customer("Acme Inc", idempotency_key=new_key()) != first

    def test_onboarding_is_started_once_per_key(self, fiat: FiatProvider) -> None:
        key = new_key()
        first = fiat.start_onboarding("Acme Inc", idempotency_key=key, email=EMAIL)
        assert first.customer_id and first.status
        again = fiat.start_onboarding("Acme Inc", idempotency_key=key, email=EMAIL)
        assert again.customer_id == first.customer_id
        other = fiat.start_onboarding("Acme Inc", idempotency_key=new_key(), email=EMAIL)
        assert other.customer_id != first.customer_id

    def test_a_customer_waits_for_approval_with_a_link(
        self, fiat: FiatProvider, approve: Approve
    ) -> None:
        """Approved at once, or not yet, with the hosted page to complete; approved after
        the approval, and its status reads so."""
        started = fiat.start_onboarding("Acme Inc", idempotency_key=new_key(), email=EMAIL)
        read = fiat.customer_status(started.customer_id)
        assert read.customer_id == started.customer_id
        if not started.approved:
            assert not read.approved and (read.url or "").startswith("https://")
            approve(started.customer_id)
        assert fiat.customer_status(started.customer_id).approved

    def test_register_returns_an_id(self, fiat: FiatProvider, customer: str) -> None:
        found = fiat.register_external_account(customer, ACCOUNT, idempotency_key=new_key())
        assert isinstance(found, str) and found.strip()

    def test_same_key_returns_the_same_id(self, fiat: FiatProvider, customer: str) -> None:
        key = new_key()
        first = fiat.register_external_account(customer, ACCOUNT, idempotency_key=key)
        assert fiat.register_external_account(customer, ACCOUNT, idempotency_key=key) == first

    def test_same_key_registers_once(self, fiat: FiatProvider, customer: str) -> None:
        """A retry (the same request under the same key) registers nothing new."""
        key = new_key()
        first = fiat.register_external_account(customer, ACCOUNT, idempotency_key=key)
        assert fiat.register_external_account(customer, ACCOUNT, idempotency_key=key) == first

    def test_different_keys_give_different_ids(self, fiat: FiatProvider, customer: str) -> None:
        """The same account registered under two keys is two registrations."""
        ids = [
            fiat.register_external_account(customer, ACCOUNT, idempotency_key=new_key())
            for _ in "ab"
        ]
        other = fiat.register_external_account(customer, OTHER_ACCOUNT, idempotency_key=new_key())
        assert len({*ids, other}) == 3

    def test_concurrent_retries_of_one_key_get_one_id(
        self, fiat: FiatProvider, customer: str
    ) -> None:
        key, lock = new_key(), threading.Lock()
        found: list[str] = []

        def register() -> None:
            result = fiat.register_external_account(customer, ACCOUNT, idempotency_key=key)
            with lock:
                found.append(result)

        run_threads([register] * 20)
        assert len(found) == 20 and len(set(found)) == 1
        assert fiat.register_external_account(customer, ACCOUNT, idempotency_key=key) == found[0]

    def test_concurrent_keys_get_distinct_ids(self, fiat: FiatProvider, customer: str) -> None:
        keys = [new_key() for _ in range(20)]
        found: dict[str, str] = {}
        lock = threading.Lock()

        def register(key: str) -> None:
            result = fiat.register_external_account(customer, ACCOUNT, idempotency_key=key)
            with lock:
                found[key] = result

        run_threads([functools.partial(register, key) for key in keys])
        assert sorted(found) == sorted(keys)
        assert len(set(found.values())) == 20
        for key in keys[:3]:  # each key still names its own registration
            assert (
                fiat.register_external_account(customer, ACCOUNT, idempotency_key=key) == found[key]
            )

    # -- transfers -----------------------------------------------------------------------

    def test_an_onramp_is_created_once_per_key(
        self, fiat: FiatProvider, customer: str, account: str
    ) -> None:
        key, request = new_key(), self.onramp(account)
        first = fiat.create_transfer(customer, request, idempotency_key=key)
        assert first.id and first.state == "awaiting_funds"
        assert fiat.create_transfer(customer, request, idempotency_key=key).id == first.id
        other = fiat.create_transfer(customer, request, idempotency_key=new_key())
        assert other.id != first.id

    def test_an_offramp_is_created_once_per_key(
        self, fiat: FiatProvider, customer: str, account: str
    ) -> None:
        key, request = new_key(), self.offramp(account)
        first = fiat.create_transfer(customer, request, idempotency_key=key)
        assert first.id and first.state == "awaiting_funds"
        again = fiat.create_transfer(customer, request, idempotency_key=key)
        assert (again.id, again.deposit_address) == (first.id, first.deposit_address)
        assert fiat.create_transfer(customer, request, idempotency_key=new_key()).id != first.id

    def test_an_onramp_says_where_to_push_the_ach(
        self, fiat: FiatProvider, customer: str, account: str
    ) -> None:
        found = fiat.create_transfer(customer, self.onramp(account), idempotency_key=new_key())
        _check_bank_deposit(found.bank_deposit)
        assert found.bank_deposit is not None and found.bank_deposit.message.strip()

    def test_an_offramp_says_where_to_send_the_usdc(
        self, fiat: FiatProvider, customer: str, account: str
    ) -> None:
        found = fiat.create_transfer(customer, self.offramp(account), idempotency_key=new_key())
        assert re.fullmatch(r"0x[0-9a-fA-F]{40}", found.deposit_address or "")

    def test_states_are_read_many_at_once_in_order_and_move_forward(
        self, fiat: FiatProvider, customer: str, account: str, settle: Settle
    ) -> None:
        off = self.offramp(account)
        requests: list[OnRamp | OffRamp] = [
            self.onramp(account),
            off,
            self.onramp(account, "7", "0"),
        ]
        made = [fiat.create_transfer(customer, r, idempotency_key=new_key()) for r in requests]
        settle(made[1], off)
        order = [2, 0, 1]
        ids = [made[i].id for i in order]
        seen: list[list[ProviderTransfer]] = [[] for _ in order]
        for _ in range(MAX_READS):
            self.pass_time(fiat, ids)
            views = fiat.transfers(ids)
            assert [v.id for v in views] == ids
            for trail, view in zip(seen, views, strict=True):
                trail.append(view)
            if all(v.state == "payment_processed" for v in views):
                break
        for i, trail in zip(order, seen, strict=True):
            self._check_progress(requests[i], trail)

    def test_an_offramp_waits_for_its_deposit(
        self, fiat: FiatProvider, customer: str, account: str, settle: Settle
    ) -> None:
        request = self.offramp(account)
        made = fiat.create_transfer(customer, request, idempotency_key=new_key())
        for _ in range(3):
            self.pass_time(fiat, [made.id])
            assert [v.state for v in fiat.transfers([made.id])] == ["awaiting_funds"]
        settle(made, request)
        trail = []
        for _ in range(MAX_READS):
            self.pass_time(fiat, [made.id])
            trail.append(fiat.transfers([made.id])[0])
        self._check_progress(request, trail)

    def test_an_offramp_awaiting_funds_can_be_cancelled(
        self, fiat: FiatProvider, customer: str, account: str
    ) -> None:
        """Where the provider offers cancellation: an off-ramp whose USDC will never come
        is cancelled, stays so, and reads as cancelled; None where it offers none."""
        made = fiat.create_transfer(customer, self.offramp(account), idempotency_key=new_key())
        cancelled = fiat.cancel_transfer(made.id)
        if cancelled is None:
            pytest.skip("this provider offers no cancellation")
        assert (cancelled.id, cancelled.state) == (made.id, "canceled")
        self.pass_time(fiat, [made.id])
        assert [v.state for v in fiat.transfers([made.id])] == ["canceled"]

    def _check_progress(self, request: OnRamp | OffRamp, trail: list[ProviderTransfer]) -> None:
        """States never go back, end processed; once submitted the amount paid is the
        amount less the fee, and an on-ramp's payout has a transaction hash."""
        ranks = [PROGRESS.index(view.state) for view in trail]
        assert ranks == sorted(ranks) and trail[-1].state == "payment_processed", ranks
        paid = Decimal(request.amount) - Decimal(request.developer_fee)
        for view in trail:
            if PROGRESS.index(view.state) >= 2:
                assert view.final_amount is not None and Decimal(view.final_amount) == paid
                if isinstance(request, OnRamp):
                    assert re.fullmatch(r"0x[0-9a-fA-F]{64}", view.destination_tx_hash or "")

    # -- virtual accounts ----------------------------------------------------------------

    def test_a_virtual_account_is_created_once_per_key(
        self, fiat: FiatProvider, customer: str
    ) -> None:
        key = new_key()
        first = fiat.create_virtual_account(customer, idempotency_key=key)
        assert first.id and first.wallet_id and first.customer_id == customer
        _check_bank_deposit(first.deposit)
        assert fiat.create_virtual_account(customer, idempotency_key=key) == first
        other = fiat.create_virtual_account(customer, idempotency_key=new_key())
        assert other.id != first.id and other.wallet_id != first.wallet_id

    def test_a_new_wallet_holds_nothing(self, fiat: FiatProvider, customer: str) -> None:
        account = fiat.create_virtual_account(customer, idempotency_key=new_key())
        balance = fiat.wallet_balance(customer, account.wallet_id)
        assert re.fullmatch(r"[0-9]+(\.[0-9]+)?", balance) and Decimal(balance) == 0
