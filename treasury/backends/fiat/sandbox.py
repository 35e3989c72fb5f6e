"""``sandbox://`` — an in-process simulation of the fiat provider.

It keeps its customers, bank accounts, transfers, virtual accounts and idempotency keys
in the treasury's store (table ``sandbox_fiat``, one JSON record a row), so they outlive
the process: an organization's bank accounts and virtual account keep working after a
restart, and transfers open at a crash finish after it. Unbound to a store (a bare
``SandboxFiat()``), it keeps them in memory. Reads change nothing; its time passes in
steps (`advance`, a `SimulatedProvider`: the worker calls it once a pass before reading
the states), each moving an open transfer one state, like the real provider:

* on-ramp: ``awaiting_funds`` (the customer's ACH push is simulated as arrived) →
  ``funds_received`` → ``payment_submitted`` (USDC, the amount less the developer fee, is
  minted to the destination address on its chain; its hash is the payout's) →
  ``payment_processed``;
* off-ramp: ``awaiting_funds`` until the USDC has arrived at the transfer's deposit
  address on-chain, then ``funds_received`` → ``payment_submitted`` → ``payment_processed``.

The payout is minted through the chain's test interface (`MintingChain`); a chain
without it cannot pay on-ramps out (`UpstreamError` at that step). The sandbox's lock
guards its records only: no chain call is made while holding it. A crash between a
payout's mint and the record of its hash mints it again at the next step (a known gap
of a simulation). Bank details it invents are plausible: routing numbers pass the ABA
checksum.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from decimal import Decimal
from typing import Any, Self

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...errors import UpstreamError
from ...evm.abi import BALANCE_OF, DECIMALS
from ...money import to_units
from ..chain.base import Chain
from ..chain.minting import MintingChain
from ..storage.base import Storage
from .base import (
    FINAL_STATES,
    BankDeposit,
    ExternalAccount,
    FiatContext,
    FiatProvider,
    OffRamp,
    OnRamp,
    ProviderTransfer,
    SimulatedProvider,
    VirtualAccount,
)

ROUTING_NUMBER = "021000021"  # a valid ABA checksum
_NEXT = {"awaiting_funds": "funds_received", "funds_received": "payment_submitted"}
_NEXT |= {"payment_submitted": "payment_processed"}

Record = dict[str, Any]


class _Records:
    """The sandbox's records by (kind, id): in the treasury's store (AES-GCM sealed when
    given a key: they hold bank account numbers), else in memory."""

    def __init__(self) -> None:
        self.storage: Storage | None = None
        self.key: bytes | None = None
        self._memory: dict[tuple[str, str], Record] = {}

    def _seal(self, kind: str, id: str, body: Record) -> bytes:
        text = json.dumps(body, sort_keys=True).encode()
        if self.key is None:
            return text
        nonce = secrets.token_bytes(12)
        return nonce + AESGCM(self.key).encrypt(nonce, text, f"{kind}:{id}".encode())

    def _open(self, kind: str, id: str, stored: bytes) -> Record:
        if self.key is not None:
            stored = AESGCM(self.key).decrypt(stored[:12], stored[12:], f"{kind}:{id}".encode())
        found: Record = json.loads(stored)
        return found

    def get(self, kind: str, id: str) -> Record | None:
        if self.storage is None:
            return self._memory.get((kind, id))
        row = self.storage.read_one(
            "SELECT body FROM sandbox_fiat WHERE kind = ? AND id = ?", (kind, id)
        )
        return self._open(kind, id, bytes(row["body"])) if row else None

    def all(self, kind: str) -> dict[str, Record]:
        if self.storage is None:
            return {id: body for (k, id), body in self._memory.items() if k == kind}
        with self.storage.read() as tx:
            rows = tx.query("SELECT id, body FROM sandbox_fiat WHERE kind = ?", (kind,))
        return {row["id"]: self._open(kind, row["id"], bytes(row["body"])) for row in rows}

    def put(self, *records: tuple[str, str, Record]) -> None:
        """Write `records` ``(kind, id, body)`` at once (one transaction)."""
        if self.storage is None:
            self._memory.update({(kind, id): body for kind, id, body in records})
            return
        with self.storage.transaction() as tx:
            for kind, id, body in records:
                tx.execute(
                    "INSERT INTO sandbox_fiat (kind, id, body) VALUES (?, ?, ?)"
                    " ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body",
                    (kind, id, self._seal(kind, id, body)),
                )


class SandboxFiat(FiatProvider, SimulatedProvider):
    def __init__(self) -> None:
        self._records = _Records()
        self._lock = threading.RLock()  # the records; never held across a chain call
        self._stepping = threading.Lock()  # one step at a time: a payout minted once
        self._context: FiatContext | None = None

    @classmethod
    def from_url(cls, url: str) -> Self:
        return cls()

    @property
    def accounts(self) -> dict[str, ExternalAccount]:
        """The bank accounts registered, by the sandbox's id (for tests)."""
        found = self._records.all("account")
        return {id: ExternalAccount(**body["account"]) for id, body in found.items()}

    def bind(self, context: FiatContext) -> None:
        self._context = context
        self._records.storage = context.storage
        self._records.key = context.encryption_key

    # -- creating things, once per key ---------------------------------------------------

    def _once(self, key: str, kind: str, make: Callable[[], Record], *also: str) -> Record:
        """The record made under our idempotency `key`: made on first use and kept in one
        transaction with the key (and with records of the kinds `also`, which `make`
        returns under those names), read back after."""
        with self._lock:
            made = self._records.get("key", key)
            if made is not None:
                found = self._records.get(made["kind"], made["id"])
                assert found is not None
                return found
            body = make()
            extra = [(k, body[k]["id"], body.pop(k)) for k in also]
            key_record = {"kind": kind, "id": body["id"]}
            self._records.put((kind, body["id"], body), *extra, ("key", key, key_record))
            return body

    def create_customer(self, name: str, *, idempotency_key: str) -> str:
        made = self._once(idempotency_key, "customer", lambda: {"id": _id("cust"), "name": name})
        return str(made["id"])

    def register_external_account(
        self, customer_id: str, account: ExternalAccount, *, idempotency_key: str
    ) -> str:
        self._customer(customer_id)
        made = self._once(
            idempotency_key, "account", lambda: {"id": _id("ea"), "account": asdict(account)}
        )
        return str(made["id"])

    def deactivate_external_account(self, customer_id: str, account_id: str) -> None:
        self._customer(customer_id)
        account = self._records.get("account", account_id)
        if account is None:
            raise UpstreamError(f"unknown external account {account_id}")
        self._records.put(("account", account_id, {**account, "active": False}))

    def create_transfer(
        self, customer_id: str, request: OnRamp | OffRamp, *, idempotency_key: str
    ) -> ProviderTransfer:
        name = self._customer(customer_id)
        account = self._records.get("account", request.external_account_id)
        if account is None:
            raise UpstreamError(f"unknown external account {request.external_account_id}")
        if account.get("active") is False:
            raise UpstreamError(f"external account {request.external_account_id} is deactivated")

        def make() -> Record:
            view = ProviderTransfer(id=_id("tr"), state="awaiting_funds")
            if isinstance(request, OnRamp):
                view = replace(view, bank_deposit=_bank_deposit(name))
            else:
                view = replace(view, deposit_address="0x" + secrets.token_hex(20))
            kind = "onramp" if isinstance(request, OnRamp) else "offramp"
            return {"id": view.id, kind: asdict(request), "view": asdict(view)}

        return _view(self._once(idempotency_key, "transfer", make))

    def create_virtual_account(self, customer_id: str, *, idempotency_key: str) -> VirtualAccount:
        name = self._customer(customer_id)

        def make() -> Record:
            account = VirtualAccount(
                id=_id("va"),
                customer_id=customer_id,
                wallet_id=_id("wallet"),
                developer_fee_percent="0.0",
                deposit=_bank_deposit(name),
            )
            return {**asdict(account), "wallet": {"id": account.wallet_id, "balance": "0"}}

        made = self._once(idempotency_key, "virtual_account", make, "wallet")
        return VirtualAccount(**{**made, "deposit": BankDeposit(**made["deposit"])})

    # -- reading, and the simulated passing of time --------------------------------------

    def wallet_balance(self, customer_id: str, wallet_id: str) -> str:
        wallet = self._records.get("wallet", wallet_id)
        if wallet is None:
            raise UpstreamError(f"the sandbox has no wallet {wallet_id}")
        return str(wallet["balance"])

    def transfers(self, ids: Sequence[str]) -> list[ProviderTransfer]:
        """The transfers asked for, as they are. One this sandbox never made is an
        `UpstreamError`, as with a real provider: nothing is failed by mistake."""
        records = {i: self._records.get("transfer", i) for i in ids}
        unknown = [i for i, record in records.items() if record is None]
        if unknown:
            raise UpstreamError(f"the sandbox knows no transfer {', '.join(unknown)}")
        return [_view(record) for record in records.values() if record is not None]

    def advance(self, ids: Sequence[str]) -> None:
        """Move each open transfer of `ids` one state forward (and keep it): the time of
        one worker pass. Unknown ids are skipped (`transfers` refuses them)."""
        with self._stepping:
            for transfer_id in dict.fromkeys(ids):
                record = self._records.get("transfer", transfer_id)
                if record is None or _view(record).state in FINAL_STATES:
                    continue
                view = _view(record)
                moved = self._step(view, _request(record))  # may read or mint on-chain
                if moved == view:
                    continue
                with self._lock:
                    current = self._records.get("transfer", transfer_id)
                    if current is not None and _view(current) == view:  # not cancelled
                        self._records.put(
                            ("transfer", transfer_id, {**current, "view": asdict(moved)})
                        )

    def cancel_transfer(self, transfer_id: str) -> ProviderTransfer | None:
        """Cancel a transfer that awaits funds; any other is answered as it is."""
        with self._lock:
            record = self._records.get("transfer", transfer_id)
            if record is None:
                raise UpstreamError(f"the sandbox knows no transfer {transfer_id}")
            view = _view(record)
            if view.state == "awaiting_funds":
                view = replace(view, state="canceled")
                self._records.put(("transfer", transfer_id, {**record, "view": asdict(view)}))
            return view

    def _step(self, view: ProviderTransfer, request: OnRamp | OffRamp) -> ProviderTransfer:
        following = _NEXT[view.state]
        if isinstance(request, OffRamp) and view.state == "awaiting_funds":
            assert view.deposit_address is not None
            if self._usdc_at(request.chain_id, view.deposit_address) < Decimal(request.amount):
                return view  # the wallet's USDC has not arrived yet
        if isinstance(request, OnRamp) and following == "payment_submitted":
            paid = Decimal(request.amount) - Decimal(request.developer_fee)
            chain = self._chain(request.chain_id)
            if not isinstance(chain, MintingChain):
                raise UpstreamError(
                    f"the sandbox pays on-ramps out only on a test chain, not {request.chain_id}"
                )
            tx_hash = chain.faucet(request.to_address, "USDC", format(paid, "f"))
            view = replace(view, destination_tx_hash=tx_hash, final_amount=format(paid, "f"))
        if isinstance(request, OffRamp) and following == "payment_submitted":
            paid = Decimal(request.amount) - Decimal(request.developer_fee)
            view = replace(view, final_amount=format(paid, "f"))
        return replace(view, state=following)

    def _usdc_at(self, chain_id: int, address: str) -> Decimal:
        """The USDC `address` holds, in whole units (at the decimals the token answers)."""
        chain = self._chain(chain_id)
        usdc = chain.addresses["USDC"]
        raw = BALANCE_OF.decode(chain.call(usdc, BALANCE_OF.encode(address)))[0]
        decimals = DECIMALS.decode(chain.call(usdc, DECIMALS.encode()))[0]
        return Decimal(to_units(int(str(raw)), int(str(decimals))))

    def _chain(self, chain_id: int) -> Chain:
        if self._context is None:
            raise UpstreamError("the sandbox provider is not bound to a treasury")
        return self._context.chain(chain_id)

    def _customer(self, customer_id: str) -> str:
        customer = self._records.get("customer", customer_id)
        if customer is None:
            raise UpstreamError(f"unknown customer {customer_id}")
        return str(customer["name"])

    # -- test helpers ------------------------------------------------------------------

    def deposit_to_virtual_account(self, virtual_account_id: str, amount: str) -> None:
        """Simulate a USD deposit arriving at a virtual account (USDB credited 1:1)."""
        with self._lock:
            account = self._records.get("virtual_account", virtual_account_id)
            if account is None:
                raise UpstreamError(f"the sandbox has no virtual account {virtual_account_id}")
            wallet = self._records.get("wallet", account["wallet_id"])
            assert wallet is not None
            balance = Decimal(wallet["balance"]) + Decimal(amount)
            self._records.put(("wallet", wallet["id"], {**wallet, "balance": format(balance, "f")}))


def _view(record: Record) -> ProviderTransfer:
    view = dict(record["view"])
    deposit = view.pop("bank_deposit")
    return ProviderTransfer(**view, bank_deposit=BankDeposit(**deposit) if deposit else None)


def _request(record: Record) -> OnRamp | OffRamp:
    if "onramp" in record:
        return OnRamp(**record["onramp"])
    return OffRamp(**record["offramp"])


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
