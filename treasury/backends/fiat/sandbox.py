"""``sandbox://`` — an in-process simulation of the fiat provider.

It keeps its customers, accounts, transfers and virtual accounts in memory (like the
devnet, it lives inside one process) and moves like the real provider, one state per
poll (`transfers`, which the treasury's job calls once a pass):

* on-ramp: ``awaiting_funds`` (the customer's ACH push is simulated as arrived) →
  ``funds_received`` → ``payment_submitted`` (USDC, the amount less the developer fee, is
  minted to the destination address on its chain; its hash is the payout's) →
  ``payment_processed``;
* off-ramp: ``awaiting_funds`` until the USDC has arrived at the transfer's deposit
  address on-chain, then ``funds_received`` → ``payment_submitted`` → ``payment_processed``.

Bank details it invents are plausible: routing numbers pass the ABA checksum.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Self

from ...errors import UpstreamError
from ...evm.abi import BALANCE_OF
from ...money import to_raw
from .base import (
    FINAL_STATES,
    BankDeposit,
    ExternalAccount,
    FiatContext,
    FiatProvider,
    OffRamp,
    OnRamp,
    ProviderTransfer,
    VirtualAccount,
)

ROUTING_NUMBER = "021000021"  # a valid ABA checksum
_NEXT = {"awaiting_funds": "funds_received", "funds_received": "payment_submitted"}
_NEXT |= {"payment_submitted": "payment_processed"}


@dataclass
class _Transfer:
    request: OnRamp | OffRamp
    view: ProviderTransfer


class SandboxFiat(FiatProvider):
    def __init__(self) -> None:
        self.customers: dict[str, str] = {}  # id -> name
        self.accounts: dict[str, ExternalAccount] = {}  # provider id -> account
        self.virtual_accounts: dict[str, VirtualAccount] = {}
        self.balances: dict[str, Decimal] = {}  # provider wallet id -> USDB
        self._transfers: dict[str, _Transfer] = {}
        self._by_key: dict[str, Any] = {}  # idempotency key -> what it created
        self._lock = threading.RLock()
        self._context: FiatContext | None = None

    @classmethod
    def from_url(cls, url: str) -> Self:
        return cls()

    def bind(self, context: FiatContext) -> None:
        self._context = context

    # -- creating things, once per key ---------------------------------------------------

    def _once(self, key: str, make: Any) -> Any:
        with self._lock:
            if key not in self._by_key:
                self._by_key[key] = make()
            return self._by_key[key]

    def create_customer(self, name: str, *, idempotency_key: str) -> str:
        def make() -> str:
            customer = _id("cust")
            self.customers[customer] = name
            return customer

        return str(self._once(idempotency_key, make))

    def register_external_account(
        self, customer_id: str, account: ExternalAccount, *, idempotency_key: str
    ) -> str:
        self._customer(customer_id)

        def make() -> str:
            found = _id("ea")
            self.accounts[found] = account
            return found

        return str(self._once(idempotency_key, make))

    def create_transfer(
        self, customer_id: str, request: OnRamp | OffRamp, *, idempotency_key: str
    ) -> ProviderTransfer:
        self._customer(customer_id)
        if request.external_account_id not in self.accounts:
            raise UpstreamError(f"unknown external account {request.external_account_id}")

        def make() -> ProviderTransfer:
            view = ProviderTransfer(id=_id("tr"), state="awaiting_funds")
            if isinstance(request, OnRamp):
                view = replace(view, bank_deposit=_bank_deposit(self.customers[customer_id]))
            else:
                view = replace(view, deposit_address="0x" + secrets.token_hex(20))
            self._transfers[view.id] = _Transfer(request, view)
            return view

        made: ProviderTransfer = self._once(idempotency_key, make)
        return self._transfers[made.id].view

    def create_virtual_account(self, customer_id: str, *, idempotency_key: str) -> VirtualAccount:
        name = self._customer(customer_id)

        def make() -> VirtualAccount:
            account = VirtualAccount(
                id=_id("va"),
                customer_id=customer_id,
                wallet_id=_id("wallet"),
                developer_fee_percent="0.0",
                deposit=_bank_deposit(name),
            )
            self.virtual_accounts[account.id] = account
            self.balances[account.wallet_id] = Decimal(0)
            return account

        made: VirtualAccount = self._once(idempotency_key, make)
        return made

    # -- reading, and the simulated passing of time --------------------------------------

    def wallet_balance(self, customer_id: str, wallet_id: str) -> str:
        with self._lock:
            if wallet_id not in self.balances:
                raise UpstreamError(
                    f"the sandbox has no wallet {wallet_id} (it forgets its"
                    " state when its process ends)"
                )
            return format(self.balances[wallet_id], "f")

    def transfers(self, ids: Sequence[str]) -> list[ProviderTransfer]:
        """The transfers asked for, each open one moved one state forward first. One this
        sandbox never made (it forgets everything when its process ends) is an
        `UpstreamError`, as with a real provider: nothing is failed by mistake."""
        with self._lock:
            unknown = [i for i in ids if i not in self._transfers]
            if unknown:
                raise UpstreamError(f"the sandbox knows no transfer {', '.join(unknown)}")
            found = []
            for transfer_id in ids:
                transfer = self._transfers[transfer_id]
                if transfer.view.state not in FINAL_STATES:
                    transfer.view = self._step(transfer)
                found.append(transfer.view)
            return found

    def _step(self, transfer: _Transfer) -> ProviderTransfer:
        view, request = transfer.view, transfer.request
        following = _NEXT[view.state]
        if isinstance(request, OffRamp) and view.state == "awaiting_funds":
            assert view.deposit_address is not None
            if self._usdc_at(request.chain_id, view.deposit_address) < to_raw(request.amount, 6):
                return view  # the wallet's USDC has not arrived yet
        if isinstance(request, OnRamp) and following == "payment_submitted":
            paid = Decimal(request.amount) - Decimal(request.developer_fee)
            chain = self._chain(request.chain_id)
            tx_hash = chain.faucet(request.to_address, "USDC", format(paid, "f"))
            view = replace(view, destination_tx_hash=tx_hash, final_amount=format(paid, "f"))
        if isinstance(request, OffRamp) and following == "payment_submitted":
            paid = Decimal(request.amount) - Decimal(request.developer_fee)
            view = replace(view, final_amount=format(paid, "f"))
        return replace(view, state=following)

    def _usdc_at(self, chain_id: int, address: str) -> int:
        chain = self._chain(chain_id)
        data = chain.call(chain.addresses["USDC"], BALANCE_OF.encode(address))
        return int(BALANCE_OF.decode(data)[0])

    def _chain(self, chain_id: int) -> Any:
        if self._context is None:
            raise UpstreamError("the sandbox provider is not bound to a treasury")
        return self._context.chain(chain_id)

    def _customer(self, customer_id: str) -> str:
        if customer_id not in self.customers:
            raise UpstreamError(f"unknown customer {customer_id}")
        return self.customers[customer_id]

    # -- test helpers ------------------------------------------------------------------

    def deposit_to_virtual_account(self, virtual_account_id: str, amount: str) -> None:
        """Simulate a USD deposit arriving at a virtual account (USDB credited 1:1)."""
        with self._lock:
            account = self.virtual_accounts[virtual_account_id]
            self.balances[account.wallet_id] += Decimal(amount)


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _bank_deposit(beneficiary: str) -> BankDeposit:
    return BankDeposit(
        bank_name="Lead Bank",
        bank_address="1801 Main St., Kansas City, MO 64108",
        routing_number=ROUTING_NUMBER,
        account_number=str(secrets.randbelow(10**12)).zfill(12),
        beneficiary_name=beneficiary,
        beneficiary_address="1 Sandbox Way, New York, NY 10001",
        message="BRG" + secrets.token_hex(5).upper(),
    )
