"""Transfers: the pairing of the request selects the executor; the feed lists them all.

Every creation is two-phase under its Idempotency-Key (`treasury._infra.idempotency`):
checks and signing, the claim (the transfer row, and its signed legs for an on-chain
pairing), the upstream step outside any transaction, the record.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from .._infra import audit
from .._infra.clock import to_text
from .._infra.group import Group
from .._infra.idempotency import LEASE, Hold, Upstream, WriteAhead, run_composite
from .._infra.identity import same_user
from .._infra.models import ListOf, Page, PageQuery
from .._infra.pagination import Cursors, page_of
from .._infra.runtime import Runtime
from .._infra.validation import parse, parse_input, parse_value
from .._records import bank_accounts, customers, nonces, policy, wallets
from .._records.bank_accounts import ExternalIdRefused, parse_external_id
from .._records.transfers import RECORDED, ApprovalStatus
from ..backends.storage.base import Row, Transaction
from ..errors import Conflict, Forbidden, NotFound, ValidationError
from ..money import Amount
from . import batch, fiat, onchain, runs, store
from .models import (
    CreateTransfer,
    CreateTransferBatch,
    Currency,
    ExportQuery,
    Pairing,
    Transfer,
    TransferBatch,
)
from .refusals import REFUSALS, request_error

#: The executor of each pairing: its upstream steps (the jobs finish claims with them).
STEPS: dict[str, Callable[[Runtime], Upstream[Any, Transfer]]] = {
    "onramp": fiat.onramp_steps,
    "offramp": fiat.offramp_steps,
    "deposit": onchain.steps,
    "withdraw": onchain.steps,
    "sweep": onchain.steps,
}
#: The window of the policy's daily limit: the trailing 24 hours.
DAY = timedelta(hours=24)
#: The failure reason of a transfer rejected by its approver.
REJECTED = "rejected"


def _amount(request: CreateTransfer, token: str) -> Amount:
    """The request's amount in `token` (its symbol on the chain: ``"USDC"``, ``"c0"``)."""
    return Amount.of(request.amount, token)


class _NoRoom(Exception):
    """The wallet of a swap has no room for its legs among its legs in flight: queue it."""


@dataclass(frozen=True)
class Creator:
    """Who asked for a transfer: the API key (None in-process) and its user."""

    api_key_id: str | None
    user_id: str


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
        try:
            return self._create(request, idempotency_key)
        except REFUSALS as refused:
            raise request_error(refused) from None

    def _create(self, request: CreateTransfer, idempotency_key: str | None) -> Transfer:
        pairing, rules = self._judge(request)
        runtime = self._scope.runtime
        chain_id = runtime.chains.primary
        if rules.needs_approval(Decimal(request.amount)):
            return self._accepted(request, pairing, chain_id, idempotency_key, awaiting=True)
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
        wallet = str(request.source.from_address)

        def checks() -> WriteAhead:
            if pairing == "offramp":
                return self._offramp(request, pairing, chain_id)
            if not runs.has_room(runtime, runtime.chains.get(chain_id), wallet):
                raise _NoRoom  # (once its key is looked at: a replay needs no room)
            return self._swap(request, pairing, chain_id)

        def create() -> Transfer:
            return self._in_two_phases("create", idempotency_key, request, checks, steps, Transfer)

        with runtime.signer.holding(chain_id, wallet):
            if pairing == "offramp":  # signs its send after its claim, apart there
                return create()
            try:
                return nonces.apart(create)  # a swap's legs are stored in its claim
            except _NoRoom:  # its legs are signed when its wallet has room for them
                queued = runs.place(runtime.now())
                return self._accepted(request, pairing, chain_id, idempotency_key, queued=queued)

    def create_batch(
        self,
        items: CreateTransferBatch | Mapping[str, Any] | Sequence[Any] | None = None,
        *,
        atomic: bool = False,
        idempotency_key: str | None = None,
    ) -> TransferBatch:
        """A payout run: 1 to 1,000 transfer bodies, each judged as `create` would judge
        it, under its own key ``"{idempotency_key}:{index}"``. The answer lists each
        item's status in order (201 with its transfer, or the error `create` would
        raise); with `atomic`, every item is accepted or, at the first refusal (a 400
        naming ``items.<index>``), none is written. The same key replays the whole
        answer. `items` is the list of bodies, or the whole request body."""
        if isinstance(items, CreateTransferBatch | Mapping):
            request = parse(CreateTransferBatch, items)
        else:
            request = parse(CreateTransferBatch, {"items": list(items or []), "atomic": atomic})

        def run(hold: Hold) -> tuple[TransferBatch, bool]:
            return batch.run(self, request, idempotency_key, hold, STEPS)

        printed = batch.fingerprinted(request)
        operation = self._operation("create_batch")
        return run_composite(self._scope, idempotency_key, operation, printed, run, TransferBatch)

    def approve(self, transfer_id: str) -> Transfer:
        """Approve a transfer awaiting approval (four eyes: not by the user who created
        it, 403); the jobs start it within one pass. Approving again answers the same;
        after a rejection, 409."""
        return self._decide(transfer_id, "approved")

    def reject(self, transfer_id: str) -> Transfer:
        """Reject a transfer awaiting approval (not by its creator's user, 403): it fails
        with ``failure_reason`` ``"rejected"``. Rejecting again answers the same; after
        an approval, 409."""
        return self._decide(transfer_id, "rejected")

    def export(
        self, query: ExportQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> ListOf[Transfer]:
        """The feed between two times (`from_` included, `to` excluded), oldest first:
        the rows of the CSV export (``GET /v1/transfers/export``)."""
        return ListOf[Transfer](
            data=[t for chunk in self.export_chunks(query, **params) for t in chunk]
        )

    def export_chunks(
        self, query: ExportQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> Iterator[list[Transfer]]:
        """`export`'s rows a few hundred at a time, read from the store as they are
        consumed (how HTTP streams the CSV). It holds a read snapshot of this thread
        until exhausted or closed."""
        query = parse_input(ExportQuery, query, params, "query")
        box = self._scope.runtime.secrets
        start, end = to_text(query.from_), to_text(query.to)
        with self._scope.runtime.storage.read() as tx:
            for rows in store.oldest_first(tx, self._scope.org_id, start, end):
                yield [store.shown(row, box) for row in rows]

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

    # -- the policy and approvals ---------------------------------------------------------

    def _judge(self, request: CreateTransfer) -> tuple[Pairing, policy.Rules]:
        """What every creation checks first: the rules across fields, the pairing, the
        policy's destinations. The pairing and the policy (400 on a refusal)."""
        if problems := request.problems():
            raise ValidationError.fields(problems)
        pairing = request.pairing
        assert pairing is not None
        rules = policy.read(self._scope.runtime.storage, self._scope.org_id)
        self._check_destination(request, pairing, rules)
        return pairing, rules

    def _check_destination(
        self, request: CreateTransfer, pairing: Pairing, rules: policy.Rules
    ) -> None:
        """Under ``destinations: "known"``, the address an on-chain pairing or an on-ramp
        pays must be a wallet of the organization or one of its saved recipients, past
        the policy's cooldown (`policy.known_destination`)."""
        to_address = request.destination.to_address
        if rules.destinations != "known" or pairing == "offramp" or to_address is None:
            return
        runtime = self._scope.runtime
        with runtime.storage.read() as tx:
            known = policy.known_destination(
                tx,
                self._scope.org_id,
                str(to_address),
                runtime.now(),
                rules.destination_cooldown_hours,
            )
        if not known:
            raise ValidationError.field(
                "body",
                "destination.to_address",
                'refused by the policy (destinations: "known"): not a wallet or a saved'
                " recipient of the organization, or saved less than"
                f" {rules.destination_cooldown_hours} hours ago (destinationCooldownHours)",
            )

    def _accepted(
        self,
        request: CreateTransfer,
        pairing: Pairing,
        chain_id: int,
        key: str | None,
        *,
        awaiting: bool = False,
        queued: str | None = None,
    ) -> Transfer:
        """Accept a transfer at or above the approval threshold (`awaiting`), or a swap
        whose wallet has no room among its legs in flight (`queued`, its place in the
        wallet's queue): checked, reserved and counted like any, announced, and kept
        awaiting a decision or room; nothing signed, sent or asked of the provider. Its
        outcome is kept under its key at once."""
        if pairing == "onramp":
            write_ahead = self._onramp(request, chain_id, awaiting=True)
        elif pairing == "offramp":
            write_ahead = self._offramp(request, pairing, chain_id, awaiting=True)
        else:
            write_ahead = self._swap(request, pairing, chain_id, awaiting=awaiting, queued=queued)
        box = self._scope.runtime.secrets

        def accept(tx: Transaction) -> Transfer:
            row = store.get(tx, write_ahead(tx))
            assert row is not None
            return store.shown(row, box)

        return self._in_one_transaction("create", key, request, accept, Transfer, look_first=True)

    def _decide(self, transfer_id: str, decision: ApprovalStatus) -> Transfer:
        transfer_id = str(parse_value(uuid.UUID, transfer_id, "path", "id"))
        runtime, org_id = self._scope.runtime, self._scope.org_id
        with runtime.storage.transaction() as tx:
            row = store.get(tx, transfer_id, org_id)
            if row is None:
                raise NotFound("Transfer not found")
            if same_user(row["created_by_user"], self._scope.user_id):
                raise Forbidden(
                    "four eyes: a transfer is approved or rejected by another user than"
                    " the one whose key created it"
                )
            if store.decide(tx, transfer_id, decision) and decision == "rejected":
                now, box = runtime.now_text(), runtime.secrets
                store.move(
                    tx, transfer_id, "failed", now, box=box, stage=RECORDED, failure=REJECTED
                )
            row = store.get(tx, transfer_id, org_id)
            assert row is not None
            if row["approval_status"] != decision:
                raise Conflict(_undecidable(row["approval_status"], decision))
            decided = store.shown(row, runtime.secrets)
            audit.record(tx, decided)
        return decided

    # -- what each pairing checks and claims ----------------------------------------------

    def _swap(
        self,
        request: CreateTransfer,
        pairing: Pairing,
        chain_id: int,
        awaiting: bool = False,
        queued: str | None = None,
    ) -> WriteAhead:
        runtime = self._scope.runtime
        chain = runtime.chains.get(chain_id)
        swap = self._swap_of(request, pairing, chain_id)
        legs: list[store.Leg] = []
        if awaiting or queued is not None:  # signed once approved, or once there is room
            reserve = onchain.unsigned_reserve(runtime, chain, swap)
        else:
            legs, reserve = onchain.sign_legs(runtime, chain, swap)
        return self._swap_claim(request, pairing, swap, legs, reserve, awaiting, queued)

    def _swap_of(self, request: CreateTransfer, pairing: Pairing, chain_id: int) -> onchain.Swap:
        """The swap a deposit or withdrawal makes: from a managed wallet of the
        organization, to a destination that is no contract of the chain (400 else)."""
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
            raw=onchain.raw_amount(
                runtime, chain_id, _amount(request, "USDC" if deposit else "c0")
            ),
            recipient=str(request.destination.to_address),
            swap_kind="deposit" if deposit else "withdrawal",
        )
        runtime.chains.check_destination(swap.recipient, [chain_id])
        return swap

    def _swap_claim(
        self,
        request: CreateTransfer,
        pairing: Pairing,
        swap: onchain.Swap,
        legs: Sequence[store.Leg],
        reserve: onchain.Reserve,
        awaiting: bool = False,
        queued: str | None = None,
    ) -> WriteAhead:
        """The claim of a swap: its row, its signed legs (none while it awaits an
        approval or room), what it holds of its wallet."""
        chain_id = swap.chain_id
        runtime = self._scope.runtime
        station = onchain.station(
            runtime, runtime.chains.get(chain_id), self._scope.org_id, swap.wallet
        )
        if station is not None:  # the organization's gas station may pay what it lacks
            reserve = dataclasses.replace(reserve, station=station)
        sides = {
            "source": onchain_side(swap.wallet, chain_id, request.source.currency, request.amount),
            "destination": onchain_side(
                swap.recipient, chain_id, request.destination.currency, request.amount
            ),
        }
        return self._claim_transfer(
            request, pairing, chain_id, swap.wallet, None, sides, legs, reserve, awaiting, queued
        )

    def _offramp(
        self, request: CreateTransfer, pairing: Pairing, chain_id: int, awaiting: bool = False
    ) -> WriteAhead:
        runtime = self._scope.runtime
        customers.provider_customer(runtime, self._scope.org_id)  # 409 until onboarded
        chain = runtime.chains.get(chain_id)
        wallet = self._managed_wallet(str(request.source.from_address))
        bank = self._bank_account("destination", str(request.destination.external_account_id))
        raw = onchain.raw_amount(runtime, chain_id, _amount(request, "USDC"))
        usdc = chain.addresses["USDC"]
        reserve = onchain.send_reserve(runtime, chain, wallet["address"], usdc, raw)
        sides = {
            "source": onchain_side(wallet["address"], chain_id, "usdc", request.amount),
            "destination": _bank_side(bank, "usd", _less_fee(request)),
        }
        return self._claim_transfer(
            request,
            pairing,
            chain_id,
            wallet["address"],
            bank,
            sides,
            reserve=reserve,
            awaiting=awaiting,
        )

    def _onramp(self, request: CreateTransfer, chain_id: int, awaiting: bool = False) -> WriteAhead:
        customers.provider_customer(self._scope.runtime, self._scope.org_id)  # 409 until onboarded
        bank = self._bank_account("source", str(request.source.external_account_id))
        to_address = str(request.destination.to_address)
        self._scope.runtime.chains.check_destination(to_address, [chain_id])
        sides = {
            "source": _bank_side(bank, "usd", request.amount),
            "destination": onchain_side(to_address, chain_id, "usdc", _less_fee(request)),
        }
        return self._claim_transfer(
            request, "onramp", chain_id, None, bank, sides, awaiting=awaiting
        )

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
        awaiting: bool = False,
        queued: str | None = None,
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
            creator=Creator(self._scope.api_key_id, self._scope.user_id),
            awaiting=awaiting,
            queued=queued,
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
        try:
            external_id = parse_external_id(external_id)
        except ExternalIdRefused as refused:
            raise refused.at("body", field) from None
        row = bank_accounts.provider_account(
            self._scope.runtime.storage, self._scope.org_id, external_id
        )
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
    creator: Creator | None = None,
    awaiting: bool = False,
    queued: str | None = None,
) -> WriteAhead:
    """The claim of a new transfer (its write-ahead): its row (and its signed legs,
    written ahead), pending and ``claimed`` under a lease that a finishing job honours
    (or, `awaiting` its approval or `queued` for room among its wallet's legs in flight,
    accepted and announced; nothing signed). What it takes
    from its wallet (`reserve`) is checked against the available balance under the
    wallet's lock across processes, so concurrent requests cannot together spend more
    than it holds. A request's transfer (one with a `creator`; sweeps are the service's
    own) is checked against the policy's daily limit under the organization's lock, taken
    first by every such claim (then the wallet's: one order, no deadlock), so concurrent
    requests cannot together pass the limit, with or without a source wallet."""
    transfer_id, now = str(uuid.uuid4()), runtime.now()

    def write(tx: Transaction) -> str:
        if creator is not None:
            tx.lock(f"transfers:{org_id}")
        if reserve is not None:
            tx.lock(f"nonces:{chain_id}:{reserve.wallet}")
            reserve.check(tx)
        if creator is not None:
            _check_daily_limit(tx, org_id, Decimal(amount), now)
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
                **(reserve.columns(tx) if reserve is not None else {}),
                **(
                    {"created_by_key": creator.api_key_id, "created_by_user": creator.user_id}
                    if creator is not None
                    else {}
                ),
            },
            awaiting=awaiting,
            queued=queued,
        )
        if reserve is not None:
            nonces.note_hold(chain_id, reserve.wallet, reserve.token, reserve.raw, reserve.wei)
        if awaiting or queued is not None:
            store.announce(tx, transfer_id, "created", to_text(now), runtime.secrets)
        if legs:
            assert wallet is not None
            store.add_legs(tx, transfer_id, chain_id, wallet, legs)
        return transfer_id

    return write


def _check_daily_limit(tx: Transaction, org_id: str, amount: Decimal, now: datetime) -> None:
    """400 unless the organization's transfers accepted in the trailing 24 hours and not
    failed, plus `amount`, stay within the policy's daily limit (under its lock)."""
    limit = policy.read(tx, org_id).daily_limit
    if limit is None:
        return
    used = store.accepted_since(tx, org_id, to_text(now - DAY))
    if used + amount > limit:
        raise ValidationError.field(
            "body",
            "amount",
            f"over the policy's daily limit: {_plain(limit)} per 24 hours, {_plain(used)}"
            f" accepted, requested {_plain(amount)}",
        )


def _plain(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _undecidable(status: ApprovalStatus, decision: ApprovalStatus) -> str:
    if status == "not_required":
        return "the transfer does not await approval"
    return f"the transfer is {status.replace('_', ' ')}: it cannot be {decision} now"


def onchain_side(address: str, chain_id: int, currency: Currency, amount: str) -> str:
    return store.Side(currency, amount, address=address, chain_id=chain_id).dumps()


def _bank_side(bank: Row, currency: Currency, amount: str) -> str:
    shown = store.BankShown(
        id=bank["external_id"],
        bank_name=bank["bank_name"],
        account_owner_name=bank["account_owner_name"],
        account_number_last4=bank["account_number_last4"],
    )
    return store.Side(currency, amount, bank_account=shown).dumps()


def _less_fee(request: CreateTransfer) -> str:
    """What the destination is expected to receive: the amount less the developer fee."""
    paid = Decimal(request.amount) - Decimal(request.developer_fee or "0")
    return format(paid.normalize(), "f")
