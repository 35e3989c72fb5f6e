"""Transfers: the pairing of the request selects the executor; the feed lists them all.

Every creation is two-phase under its Idempotency-Key (`treasury._infra.idempotency`):
checks and signing, the claim (the transfer row, and its signed legs for an on-chain
pairing), the upstream step outside any transaction, the record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from .._infra.clock import to_text
from .._infra.group import Group
from .._infra.idempotency import LEASE, Upstream, WriteAhead
from .._infra.models import Page, PageQuery
from .._infra.pagination import Cursors, page_of
from .._infra.runtime import Runtime
from .._infra.validation import parse_input, parse_value
from .._records import bank_accounts, customers, nonces, wallets
from .._records.bank_accounts import BankAccountSummary, parse_external_id
from ..backends.storage.base import Row, Transaction
from ..errors import NotFound, ValidationError
from . import fiat, onchain, store
from .models import (
    CreateTransfer,
    Currency,
    Pairing,
    Transfer,
    TransferSide,
)

#: The executor of each pairing: its upstream steps (the jobs finish claims with them).
STEPS: dict[str, Callable[[Runtime], Upstream[Any, Transfer]]] = {
    "onramp": fiat.onramp_steps,
    "offramp": fiat.offramp_steps,
    "deposit": onchain.steps,
    "withdraw": onchain.steps,
    "sweep": onchain.steps,
}


class Transfers(Group):
    name = "transfers"

    def create(
        self,
        body: CreateTransfer | Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Transfer:
        """Move value: bank → wallet (on-ramp), wallet → bank (off-ramp), USDC → c0
        (deposit), c0 → USDC (withdraw). The pairing of `source` and `destination`
        selects the executor; 400 with field details for anything refused."""
        request = parse_input(CreateTransfer, body, fields)
        if problems := request.problems():
            raise ValidationError.fields(problems)
        pairing = request.pairing
        assert pairing is not None
        runtime = self._scope.runtime
        chain_id = runtime.chains.primary
        steps = STEPS[pairing](runtime)
        if pairing == "onramp":
            return self._in_two_phases(
                "create",
                idempotency_key,
                request,
                lambda: self._onramp(request, chain_id),
                steps,
                Transfer,
            )
        checks = self._offramp if pairing == "offramp" else self._swap

        def create() -> Transfer:
            return self._in_two_phases(
                "create",
                idempotency_key,
                request,
                lambda: checks(request, pairing, chain_id),
                steps,
                Transfer,
            )

        with runtime.signer.holding(chain_id, str(request.source.from_address)):
            if pairing == "offramp":  # signs its send after its claim, apart there
                return create()
            return nonces.apart(create)  # a swap's legs are stored in its claim

    def list(
        self, query: PageQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> Page[Transfer]:
        """The feed, newest first; pass `next_cursor` back as `cursor` for the next page."""
        query = parse_input(PageQuery, query, params, "query")
        org_id = self._scope.org_id
        with self._scope.runtime.storage.read() as tx:
            rows, following = page_of(
                self._cursors(), org_id, query, lambda after, n: store.page(tx, org_id, after, n)
            )
        box = self._scope.runtime.secrets
        return Page[Transfer](data=[store.shown(row, box) for row in rows], next_cursor=following)

    def get(self, transfer_id: str) -> Transfer:
        """One transfer of the organization by its id."""
        transfer_id = str(parse_value(uuid.UUID, transfer_id, "path", "id"))
        with self._scope.runtime.storage.read() as tx:
            row = store.get(tx, transfer_id, self._scope.org_id)
        if row is None:
            raise NotFound("Transfer not found")
        return store.shown(row, self._scope.runtime.secrets)

    # -- what each pairing checks and claims ----------------------------------------------

    def _swap(self, request: CreateTransfer, pairing: Pairing, chain_id: int) -> WriteAhead:
        runtime = self._scope.runtime
        chain = runtime.chains.get(chain_id)
        wallet = self._managed_wallet(str(request.source.from_address))
        deposit = pairing == "deposit"
        usdc, c0 = chain.address("USDC"), chain.address("c0")
        swap = onchain.Swap(
            chain_id=chain_id,
            wallet=wallet["address"],
            custody_ref=wallet["custody_ref"],
            token_in=usdc if deposit else c0,
            token_out=c0 if deposit else usdc,
            raw=onchain.raw_amount(runtime, chain_id, request.amount, "USDC" if deposit else "c0"),
            recipient=str(request.destination.to_address),
            swap_kind="deposit" if deposit else "withdrawal",
        )
        runtime.chains.check_destination(swap.recipient, "destination.to_address", [chain_id])
        legs, reserve = onchain.sign_legs(runtime, chain, swap)
        sides = {
            "source": onchain_side(swap.wallet, chain_id, request.source.currency, request.amount),
            "destination": onchain_side(
                swap.recipient, chain_id, request.destination.currency, request.amount
            ),
        }
        return self._claim_transfer(
            request, pairing, chain_id, swap.wallet, None, sides, legs, reserve
        )

    def _offramp(self, request: CreateTransfer, pairing: Pairing, chain_id: int) -> WriteAhead:
        runtime = self._scope.runtime
        customers.provider_customer(runtime, self._scope.org_id)  # 409 until onboarded
        chain = runtime.chains.get(chain_id)
        wallet = self._managed_wallet(str(request.source.from_address))
        bank = self._bank_account("destination", str(request.destination.external_account_id))
        raw = onchain.raw_amount(runtime, chain_id, request.amount, "USDC")
        usdc = chain.addresses["USDC"]
        reserve = onchain.send_reserve(runtime, chain, wallet["address"], usdc, raw)
        sides = {
            "source": onchain_side(wallet["address"], chain_id, "usdc", request.amount),
            "destination": _bank_side(bank, "usd", _less_fee(request)),
        }
        return self._claim_transfer(
            request, pairing, chain_id, wallet["address"], bank, sides, reserve=reserve
        )

    def _onramp(self, request: CreateTransfer, chain_id: int) -> WriteAhead:
        customers.provider_customer(self._scope.runtime, self._scope.org_id)  # 409 until onboarded
        bank = self._bank_account("source", str(request.source.external_account_id))
        to_address = str(request.destination.to_address)
        self._scope.runtime.chains.check_destination(
            to_address, "destination.to_address", [chain_id]
        )
        sides = {
            "source": _bank_side(bank, "usd", request.amount),
            "destination": onchain_side(to_address, chain_id, "usdc", _less_fee(request)),
        }
        return self._claim_transfer(request, "onramp", chain_id, None, bank, sides)

    def _claim_transfer(
        self,
        request: CreateTransfer,
        pairing: Pairing,
        chain_id: int,
        wallet: str | None,
        bank: Row | None,
        sides: dict[str, str],
        legs: Sequence[store.Leg] | None = None,
        reserve: onchain.Reserve | None = None,
    ) -> WriteAhead:
        return claim_transfer(
            self._scope.runtime,
            self._scope.org_id,
            pairing=pairing,
            chain_id=chain_id,
            amount=request.amount,
            developer_fee=request.developer_fee or "0",
            client_reference_id=request.client_reference_id,
            wallet=wallet,
            bank_account_id=None if bank is None else bank["external_id"],
            sides=sides,
            legs=legs,
            reserve=reserve,
        )

    def _managed_wallet(self, address: str) -> Row:
        with self._scope.runtime.storage.read() as tx:
            row = wallets.by_address(tx, self._scope.org_id, address)
        if row is None or row["custody_ref"] is None:
            raise ValidationError.field(
                "body", "source.from_address", "must be a managed wallet of the organization"
            )
        return row

    def _bank_account(self, side: str, external_id: str) -> Row:
        field = f"{side}.external_account_id"
        external_id = parse_external_id(external_id, field)
        with self._scope.runtime.storage.read() as tx:
            row = bank_accounts.provider_account(tx, self._scope.org_id, external_id)
        if row is None:
            raise ValidationError.field("body", field, "is not a bank account of the organization")
        return row

    def _cursors(self) -> Cursors:
        return Cursors(self._scope.runtime.secrets.derive("cursor:transfers"), "transfers")


def claim_transfer(
    runtime: Runtime,
    org_id: str,
    *,
    pairing: Pairing,
    chain_id: int,
    amount: str,
    developer_fee: str,
    client_reference_id: str | None,
    wallet: str | None,
    bank_account_id: str | None,
    sides: dict[str, str],
    legs: Sequence[store.Leg] | None = None,
    reserve: onchain.Reserve | None = None,
) -> WriteAhead:
    """The claim of a new transfer (its write-ahead): its row (and its signed legs, written ahead), pending
    and ``claimed`` under a lease that a finishing job honours. What it takes from its
    wallet (`reserve`) is checked against the available balance under the wallet's lock
    across processes, so concurrent requests cannot together spend more than it holds."""
    transfer_id, now = str(uuid.uuid4()), runtime.now()

    def write(tx: Transaction) -> str:
        if reserve is not None:
            tx.lock(f"nonces:{chain_id}:{reserve.wallet}")
            reserve.check(tx)
        store.insert(
            tx,
            {
                "id": transfer_id,
                "org_id": org_id,
                "pairing": pairing,
                "amount": amount,
                "developer_fee": developer_fee,
                "client_reference_id": client_reference_id,
                "chain_id": chain_id,
                "wallet_address": wallet,
                "bank_account_id": bank_account_id,
                "lease_until": to_text(now + LEASE),
                "created_at": to_text(now),
                "updated_at": to_text(now),
                **sides,
                **(reserve.columns() if reserve is not None else {}),
            },
        )
        if legs:
            assert wallet is not None
            store.add_legs(tx, transfer_id, chain_id, wallet, legs)
        return transfer_id

    return write


def onchain_side(address: str, chain_id: int, currency: Currency, amount: str) -> str:
    return store.side(
        TransferSide(
            address=address, bank_account=None, chain_id=chain_id, currency=currency, amount=amount
        )
    )


def _bank_side(bank: Row, currency: Currency, amount: str) -> str:
    summary = BankAccountSummary(
        id=bank["external_id"],
        bank_name=bank["bank_name"],
        account_owner_name=bank["account_owner_name"],
        account_number_last4=bank["account_number_last4"],
    )
    return store.side(
        TransferSide(
            address=None, bank_account=summary, chain_id=None, currency=currency, amount=amount
        )
    )


def _less_fee(request: CreateTransfer) -> str:
    """What the destination is expected to receive: the amount less the developer fee."""
    paid = Decimal(request.amount) - Decimal(request.developer_fee or "0")
    return format(paid.normalize(), "f")
