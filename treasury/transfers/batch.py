"""Payout runs: `POST /v1/transfers/batch`, many transfers in one request.

Each item is judged as `POST /v1/transfers` judges a body (validation, destinations, the
available balance, the policy's daily limit and approval threshold, idempotency), under
its own key ``"{batch key}:{index}"``, in the order of the items; the answer gives each
item's status in that order. The batch's own key holds the whole answer
(`idempotency.run_composite`).

Items go in chunks of `CHUNK` (an atomic batch is one chunk). In a chunk, the swaps of each
wallet are planned with one read of the wallet (`onchain.plan_swaps`); every item is then
judged in a trial claim that is rolled back, so that nothing is signed for an item that
will be refused and no nonce is left unused; the accepted swaps are signed with
consecutive nonces as far as their wallet's room among its legs in flight goes (the rest
are queued: `runs`); every claim of the chunk is written in one transaction (each item in
a savepoint of its own); then the claims are performed (broadcast, or the provider asked)
and recorded together (`idempotency.finish_many`). A refusal in the claim that the trial
did not see (another request spent the balance meanwhile) or a nonce another process
took: the chunk is judged again, its swaps signed anew.

An atomic batch judges every item before it writes any: at the first refusal (by index)
nothing is written, nothing signed, and the answer is that refusal as a 400 naming
``items.<index>``. Accepted together, its items are then performed as any claim is: one
that the chain or the provider then refuses is answered as `POST /v1/transfers` answers a
refusal after its claim.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from .._infra import idempotency
from .._infra.idempotency import Hold, KeyHold, WriteAhead, fingerprint
from .._infra.runtime import Runtime
from .._infra.validation import parse
from .._records import nonces
from ..errors import IdempotencyInFlight, TreasuryError, UpstreamError, ValidationError
from . import onchain, runs, store
from .models import BatchItem, CreateTransfer, CreateTransferBatch, Pairing, Transfer, TransferBatch
from .refusals import request_error

if TYPE_CHECKING:
    from .operations import Transfers

#: Items judged, claimed and sent together (an atomic batch: all of them at once).
CHUNK = 50
#: Claims of one chunk tried again when another request or process got in between.
ATTEMPTS = 10
CLASH_PAUSE = 0.02

#: How an accepted item goes on: signed now (``sign``), queued for room among its
#: wallet's legs in flight (``queue``), awaiting an approval (``await``), or a fiat
#: pairing's claim (``fiat``).
Mode = Literal["sign", "queue", "await", "fiat"]
Steps = Mapping[str, Callable[[Runtime], idempotency.Upstream[Any, Transfer]]]


@dataclass
class _Item:
    """One item of the batch while it is judged, and its answer once known."""

    index: int
    request: CreateTransfer | None = None
    key: KeyHold | None = None
    pairing: Pairing | None = None
    mode: Mode = "fiat"
    swap: onchain.Swap | None = None
    plan: onchain.Plan | None = None
    legs: list[store.Leg] = field(default_factory=list)
    fiat_claim: WriteAhead | None = None  # a fiat pairing's claim, its checks done
    ref: str | None = None  # the claimed transfer, to perform
    status: int | None = None
    transfer: Transfer | None = None
    error: TreasuryError | None = None
    taken: bool = False  # its key was taken meanwhile: answered by replaying it

    @property
    def open(self) -> bool:
        """Still to be judged or claimed."""
        return self.status is None and not self.taken and self.ref is None

    def refuse(self, error: TreasuryError) -> None:
        error = request_error(error)  # as `create` answers it: the field it is about
        self.status, self.error = error.status, error

    def accept(self, transfer: Transfer) -> None:
        self.status, self.transfer = 201, transfer

    def answer(self) -> BatchItem:
        assert self.status is not None
        error = None if self.error is None else self.error.to_body()
        return BatchItem(index=self.index, status=self.status, transfer=self.transfer, error=error)


class _Rollback(Exception):
    """Undo a trial claim, or a claim the trial did not foresee (judge again)."""


class _Taken(Exception):
    """An item's key was taken by another request between the look and the claim."""


def fingerprinted(request: CreateTransferBatch) -> CreateTransferBatch:
    """The batch as its key's fingerprint reads it: each valid item as the model gives
    it (fields in model order, absent ones left out), any other item as canonical JSON
    (keys sorted), so that the same run sent again is the same request."""
    items: list[Any] = []
    for item in request.items:
        try:
            parsed = parse(CreateTransfer, item)
        except ValidationError:
            items.append(json.loads(json.dumps(item, sort_keys=True, default=str)))
            continue
        items.append(parsed.model_dump(mode="json", exclude_none=True, by_alias=True))
    return CreateTransferBatch(items=items, atomic=request.atomic)


def run(
    group: Transfers, request: CreateTransferBatch, key: str | None, hold: Hold, steps: Steps
) -> tuple[TransferBatch, bool]:
    """Judge, claim and perform every item (see the module doc); the answer, and whether
    it is final (no item in flight or failed upstream: then the batch's key keeps it)."""
    scope = group._scope
    runtime = scope.runtime
    operation = group._operation("create")
    items = [_Item(index) for index in range(len(request.items))]
    for item, body in zip(items, request.items, strict=True):
        try:
            if not isinstance(body, Mapping | CreateTransfer):  # as POST /v1/transfers says
                raise ValidationError.field("body", "", "must be a JSON object")
            item.request = parse(CreateTransfer, body)
        except ValidationError as error:
            item.refuse(error)
            continue
        if key is not None:
            item.key = KeyHold(scope, f"{key}:{item.index}", fingerprint(operation, item.request))
            if item.key.held(runtime.storage):
                _replay(runtime, item)
    if request.atomic:  # one chunk: its first refusal is raised once every item is judged
        chunks = [items]
    else:
        chunks = [items[at : at + CHUNK] for at in range(0, len(items), CHUNK)]
    for chunk in chunks:
        _chunk(group, chunk, request.atomic, steps, hold)
        hold.renew()
    for item in items:
        if item.taken:
            _replay(runtime, item)
    answers = [item.answer() for item in items]
    final = not any(_unsettled(item) for item in items)
    return TransferBatch(data=answers), final


def _replay(runtime: Runtime, item: _Item) -> None:
    """Answer an item by what its key holds (as `POST /v1/transfers` replays it)."""
    assert item.key is not None
    try:
        item.accept(item.key.replay(runtime.storage, Transfer))
    except TreasuryError as error:
        item.refuse(error)
    item.taken = False


def _judge(group: Transfers, item: _Item) -> None:
    """The checks of a single creation that need no transaction: the rules across
    fields, the policy's destinations, the source wallet, the bank account, the
    destination address, the amount's precision; which way the item goes on."""
    assert item.request is not None
    runtime = group._scope.runtime
    try:
        request = item.request
        pairing, rules = group._judge(request)
        item.pairing = pairing
        chain_id = runtime.chains.primary
        awaiting = rules.needs_approval(Decimal(request.amount))
        if pairing == "onramp":
            item.fiat_claim = group._onramp(request, chain_id, awaiting=awaiting)
        elif pairing == "offramp":
            item.fiat_claim = group._offramp(request, pairing, chain_id, awaiting=awaiting)
        else:
            item.swap = group._swap_of(request, pairing, chain_id)
            item.mode = "await" if awaiting else "sign"
            return
        item.mode = "await" if awaiting else "fiat"
    except TreasuryError as error:
        item.refuse(error)


def _refused(item: _Item) -> bool:
    return item.error is not None


def _unsettled(item: _Item) -> bool:
    """An answer that may change if the same batch is sent again: an item in flight, an
    upstream failure, an answer of the moment."""
    error = item.error
    return error is not None and (
        error.status >= 500 or isinstance(error, IdempotencyInFlight) or error.transient
    )


def _atomic(item: _Item) -> TreasuryError:
    """An atomic batch's answer at its first refusal: the item's error as a 400 whose
    fields are the item's, under ``items.<index>``; an upstream failure as it is."""
    error = item.error
    assert error is not None
    if error.status >= 500:
        return error
    where = f"items.{item.index}"
    fields = (error.details or {}).get("fields") if error.details else None
    if fields:
        named = [
            {**f, "field": f"{where}.{f['field']}" if f.get("field") else where} for f in fields
        ]
    else:
        named = [{"location": "body", "field": where, "message": error.message}]
    return ValidationError.fields(named, error.message)


# -- one chunk -------------------------------------------------------------------------------


def _chunk(group: Transfers, chunk: list[_Item], atomic: bool, steps: Steps, hold: Hold) -> None:
    """Claim the chunk's open items (planned, judged in a trial, signed, claimed), then
    perform and record those that go on now."""
    runtime = group._scope.runtime
    for item in chunk:  # when its chunk comes: what it reads of a wallet is fresh then
        if item.open:
            _judge(group, item)
    swaps = [item for item in chunk if item.open and item.swap is not None]
    wallets = sorted({(item.swap.chain_id, item.swap.wallet) for item in swaps if item.swap})
    with ExitStack() as held:
        for chain_id, wallet in wallets:  # in one order: two batches never wait on each other
            held.enter_context(runtime.signer.holding(chain_id, wallet))
        for attempt in range(1, ATTEMPTS + 1):
            try:
                _plan(runtime, swaps)
                _claims(group, chunk, atomic, trial=True)
                if atomic and (refused := [item for item in chunk if _refused(item)]):
                    raise _atomic(refused[0])
                _modes(runtime, swaps)
                _sign(runtime, swaps)
                _claims(group, chunk, atomic, trial=False)
                break
            except _Rollback:
                continue  # a refusal the trial did not foresee: judge the rest again
            except nonces.NoncesTaken:
                time.sleep(random.uniform(0, CLASH_PAUSE * attempt))  # noqa: S311 (jitter)
        else:  # other requests kept getting in between: nothing of the rest was written
            unsettled = UpstreamError(
                "other requests kept signing for these wallets; send the batch again",
                ambiguous=True,
            )
            if atomic:
                raise unsettled
            for item in chunk:
                if item.open:
                    item.refuse(unsettled)
        org_id = group._scope.org_id
        signed = [item for item in chunk if _going(item) and item.mode == "sign"]
        for chain_id in sorted({item.swap.chain_id for item in signed if item.swap}):
            mine = [item for item in signed if item.swap and item.swap.chain_id == chain_id]
            claims = [(org_id, str(item.ref), item.legs) for item in mine]
            _answer(runtime, mine, runs.send_together(runtime, chain_id, claims, hold.renew))
        asked = [item for item in chunk if _going(item) and item.mode == "fiat"]
        fiat = [(org_id, str(item.ref), steps[str(item.pairing)](runtime)) for item in asked]
        _answer(runtime, asked, idempotency.finish_many(runtime, fiat, after_each=hold.renew))


def _going(item: _Item) -> bool:
    """Claimed in this chunk, to be performed now."""
    return item.ref is not None and item.status is None


def _answer(
    runtime: Runtime, items: Sequence[_Item], results: Sequence[Transfer | TreasuryError]
) -> None:
    """Each item's answer from its claim's outcome. A claim left in flight (an ambiguous
    failure) is released to the job at once: the run is done with it, and the wallet's
    legs behind it wait for it."""
    kept = []
    for item, result in zip(items, results, strict=True):
        if isinstance(result, TreasuryError):
            item.refuse(result)
            if isinstance(result, UpstreamError) and result.ambiguous and item.ref:
                kept.append(item.ref)
        else:
            item.accept(result)
    if kept:
        with runtime.storage.transaction() as tx:
            store.release_claims(tx, kept, runtime.now_text())


def _by_wallet(items: Sequence[_Item]) -> Iterator[tuple[int, str, list[_Item]]]:
    """The open swaps of each wallet, in item order."""
    found: dict[tuple[int, str], list[_Item]] = {}
    for item in items:
        if item.open and item.swap is not None:
            found.setdefault((item.swap.chain_id, item.swap.wallet), []).append(item)
    for (chain_id, wallet), mine in found.items():
        yield chain_id, wallet, mine


def _plan(runtime: Runtime, swaps: Sequence[_Item]) -> None:
    """Plan each wallet's swaps with one read of it: those that go on now in a run (each
    approval decided with what the swaps before it may spend), each awaiting one alone
    (signed once approved)."""
    for chain_id, _, mine in _by_wallet(swaps):
        chain = runtime.chains.get(chain_id)
        moving = [item for item in mine if item.mode != "await"]
        waiting = [item for item in mine if item.mode == "await"]
        try:
            plans = onchain.plan_swaps(runtime, chain, [_swap(item) for item in moving])
            for item in waiting:
                plans += onchain.plan_swaps(runtime, chain, [_swap(item)])
        except TreasuryError as error:  # the chain did not answer: nothing of it is claimed
            for item in mine:
                item.refuse(error)
            continue
        for item, plan in zip([*moving, *waiting], plans, strict=True):
            if isinstance(plan, TreasuryError):
                item.refuse(plan)
            else:
                item.plan = plan


def _swap(item: _Item) -> onchain.Swap:
    assert item.swap is not None
    return item.swap


def _modes(runtime: Runtime, swaps: Sequence[_Item]) -> None:
    """Of each wallet's swaps that go on now, in order: signed while the wallet has room
    among its legs in flight, queued from the first that does not fit."""
    for chain_id, wallet, mine in _by_wallet(swaps):
        moving = [item for item in mine if item.mode != "await" and item.plan is not None]
        if not moving:
            continue
        assert moving[0].plan is not None
        free = runs.room(runtime, chain_id, wallet, moving[0].plan.reserve.mined)
        queueing = False
        for item in moving:
            assert item.plan is not None
            fits = not queueing and len(item.plan.legs) <= free
            item.mode = "sign" if fits else "queue"
            queueing = not fits
            free -= len(item.plan.legs) if fits else 0


def _sign(runtime: Runtime, swaps: Sequence[_Item]) -> None:
    """Sign the swaps that go on now, each wallet's with consecutive nonces above every
    nonce its stored legs hold."""
    for chain_id, wallet, mine in _by_wallet(swaps):
        signing = [item for item in mine if item.mode == "sign" and item.plan is not None]
        if not signing:
            continue
        chain = runtime.chains.get(chain_id)
        with runtime.storage.read() as tx:
            floor = nonces.next_free_nonce(tx, chain_id, wallet)
        nonce = max(chain.pending_nonce(wallet), floor)
        plans = [item.plan for item in signing if item.plan is not None]
        for item, legs in zip(
            signing, onchain.sign_plans(runtime, chain, plans, nonce), strict=True
        ):
            item.legs = legs


def _claims(group: Transfers, chunk: Sequence[_Item], atomic: bool, *, trial: bool) -> None:
    """Write every open item's claim in one transaction, each in a savepoint, in order
    (so each is judged with the ones before it accepted). `trial`: without legs, then
    rolled back; a refusal is the item's answer. Else: committed, unless an item is
    refused now that the trial accepted (`_Rollback` after the refusal is noted: judge
    the rest again) — an atomic batch's refusal is raised."""
    runtime = group._scope.runtime
    storage, box = runtime.storage, runtime.secrets
    accepted: list[tuple[_Item, str, Transfer | None]] = []
    again = False
    try:
        with storage.transaction(), nonces.carried() as holds:
            for item in chunk:
                if not item.open or (item.swap is not None and item.plan is None):
                    continue
                mark = holds.mark()
                try:
                    with storage.transaction() as part:  # a savepoint
                        ref = _write_ahead(group, item, trial)(part)
                        shown = None
                        if item.mode in ("queue", "await") and not trial:
                            row = store.get(part, ref)
                            assert row is not None
                            shown = store.shown(row, box)
                            if item.key is not None and not item.key.accept(part, shown):
                                raise _Taken
                        elif item.key is not None and not item.key.insert(
                            part, "in_flight", resource=ref
                        ):
                            raise _Taken
                        accepted.append((item, ref, shown))
                except _Taken:
                    holds.undo(mark)
                    if atomic:  # its key is another request's now
                        item.refuse(IdempotencyInFlight())
                        if not trial:
                            raise _atomic(item) from None
                        continue
                    item.taken = True
                    again = again or bool(item.legs)
                except nonces.NoncesTaken:
                    raise
                except TreasuryError as error:
                    holds.undo(mark)
                    item.refuse(error)
                    if atomic and not trial:
                        raise _atomic(item) from None
                    again = again or bool(item.legs)  # the nonces after it are left unused
            if trial or again:
                raise _Rollback
    except _Rollback:
        if not trial:
            raise
        return
    for item, ref, shown in accepted:
        if shown is not None:
            item.accept(shown)
        else:
            item.ref = ref


def _write_ahead(group: Transfers, item: _Item, trial: bool) -> WriteAhead:
    """An item's claim: a fiat pairing's as its checks made it; a swap's with its signed
    legs (none in a trial, while it awaits an approval, or queued for room)."""
    if item.fiat_claim is not None:
        return item.fiat_claim
    assert item.request is not None and item.pairing is not None and item.plan is not None
    plan = item.plan
    queued = None
    if item.mode == "queue" and not trial:
        queued = runs.place(group._scope.runtime.now(), item.index)
    legs = item.legs if item.mode == "sign" and not trial else []
    return group._swap_claim(
        item.request,
        item.pairing,
        plan.swap,
        legs,
        plan.reserve,
        awaiting=item.mode == "await",
        queued=queued,
    )
