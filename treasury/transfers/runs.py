"""A wallet's legs in flight, and the queue of the transfers waiting for room among them.

A wallet keeps at most `max_in_flight` signed legs in flight at once (stored, of a transfer
that has not failed, at or above its mined nonce), with consecutive nonces: a run of N
transfers from one wallet is mined in about ceil(N * gas per leg / block gas limit) blocks,
and a node's pool is never asked to hold more of one sender than it keeps (geth keeps 16
executable and 64 queued transactions per sender). A swap accepted while its wallet has
no room for its legs, or while other transfers of the wallet wait in its queue, is
accepted all the same (checked, reserved, announced, its key answered 201) but not signed:
it waits in the wallet's queue (stage ``queued``, ``waitingReason: "nonce"``), and
`start_queued_transfers` signs it, first in the queue first, as the wallet's legs are
mined and room frees up; then it goes on as any claim (the same perform and record, and
`finish_transfers` after a crash).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime

from .._infra import idempotency
from .._infra.clock import to_text
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import nonces, wallets
from ..backends.chain.base import Chain
from ..backends.storage.base import Row
from ..errors import TreasuryError, UpstreamError
from ..evm.signing import broadcast_each
from . import onchain, store
from .models import Transfer

#: The legs a swap takes at most (an approval, then the swap): what a request needs free.
SWAP_LEGS = 2
#: Wallets with queued transfers looked at per pass.
PER_PASS = 1_000
#: The failure of a queued transfer whose wallet can no longer sign (removed meanwhile).
CANNOT_SIGN = "the wallet can no longer sign"


def room(runtime: Runtime, chain_id: int, wallet: str, mined: int) -> int:
    """How many more legs `wallet` may sign now, its mined nonce being `mined`:
    `max_in_flight` less its legs in flight; none while transfers wait in its queue
    (they go first)."""
    with runtime.storage.read() as tx:
        if store.has_queue(tx, chain_id, wallet):
            return 0
        flying = nonces.in_flight(tx, chain_id, wallet, mined)
    return max(runtime.max_in_flight - flying, 0)


def has_room(runtime: Runtime, chain: Chain, wallet: str) -> bool:
    """Whether a swap from `wallet` may be signed now (call under the wallet's lock); the
    chain is asked for the wallet's mined nonce only when its unfinished transfers' legs
    alone could fill the room."""
    with runtime.storage.read() as tx:
        if store.has_queue(tx, chain.chain_id, wallet):
            return False
        if nonces.open_legs(tx, chain.chain_id, wallet) + SWAP_LEGS <= runtime.max_in_flight:
            return True
    return room(runtime, chain.chain_id, wallet, chain.mined_nonce(wallet)) >= SWAP_LEGS


def place(now: datetime, index: int = 0) -> str:
    """A transfer's place in its wallet's queue: when it was accepted, then its index in
    its batch (text that sorts in that order)."""
    return f"{to_text(now)}/{index:04d}"


def swap_of(chain: Chain, row: Row, custody_ref: str) -> onchain.Swap:
    """The swap an accepted deposit or withdrawal makes (from its row)."""
    deposit = row["pairing"] == "deposit"
    usdc, c0 = chain.addresses["USDC"], chain.addresses["c0"]
    return onchain.Swap(
        chain_id=int(row["chain_id"]),
        wallet=str(row["wallet_address"]),
        custody_ref=custody_ref,
        token_in=usdc if deposit else c0,
        token_out=c0 if deposit else usdc,
        raw=int(row["reserve_raw"]),
        recipient=str(store.Side.loads(row["destination"]).address),
        swap_kind="deposit" if deposit else "withdrawal",
    )


#: A claimed swap ready to go: (org_id, transfer id, its signed legs in order).
Claimed = tuple[str, str, list[store.Leg]]


def send_together(
    runtime: Runtime,
    chain_id: int,
    claims: Sequence[Claimed],
    after_each: Callable[[], None] | None = None,
) -> list[Transfer | TreasuryError]:
    """Perform and record several claimed swaps of one chain: every leg broadcast in
    order in as few requests as the chain takes (`broadcast_each`), then each claim
    recorded as its own perform step would have left it (`onchain.steps`), in one
    transaction (`idempotency.finish_many`). Each one's Transfer, or its error."""
    chain = runtime.chains.get(chain_id)
    outcomes = broadcast_each(chain, [leg.signed for _, _, legs in claims for leg in legs])
    sent: dict[str, onchain.Sent | UpstreamError] = {}
    at = 0
    for _, transfer_id, legs in claims:
        sent[transfer_id] = _sent(outcomes[at : at + len(legs)])
        at += len(legs)

    def perform(transfer_id: str) -> onchain.Sent:
        found = sent[transfer_id]
        if isinstance(found, UpstreamError):
            raise found
        return found

    steps = dataclasses.replace(onchain.steps(runtime), perform=perform)
    return idempotency.finish_many(
        runtime, [(org_id, transfer_id, steps) for org_id, transfer_id, _ in claims], after_each
    )


def _sent(outcomes: Sequence[UpstreamError | None]) -> onchain.Sent | UpstreamError:
    """What broadcasting one swap's legs came to, as its perform step tells it: all sent;
    the first refused (nothing moved: definite); a later one refused after earlier ones
    went out (`Refused`); or ambiguous, also when a leg went out after an earlier one
    was refused (sent together, it may still be mined: only evidence settles it)."""
    refused: tuple[int, UpstreamError] | None = None
    for position, outcome in enumerate(outcomes):
        if outcome is None:
            if refused is not None:
                return UpstreamError(f"{refused[1].message}; a later leg went out", ambiguous=True)
            continue
        if outcome.ambiguous:
            return outcome
        refused = refused or (position, outcome)
    if refused is None:
        return None
    position, error = refused
    return error if position == 0 else onchain.Refused(position, error.message)


def start_queued_transfers(runtime: Runtime, report: Report) -> None:
    """Job: sign the queued transfers of each wallet that has room among its legs in
    flight, first in the queue first, and send them."""
    with runtime.storage.read() as tx:
        found = store.queued_wallets(tx, PER_PASS)
    for row in found:
        chain_id, wallet = int(row["chain_id"]), str(row["wallet_address"])
        with report.part(f"wallet {wallet}"):
            _start(runtime, chain_id, wallet, report)


def _start(runtime: Runtime, chain_id: int, wallet: str, report: Report) -> None:
    chain = runtime.chains.get(chain_id)
    with runtime.storage.read() as tx:
        custody_ref = wallets.custody_ref(tx, wallet)
    if custody_ref is None:
        _fail_queue(runtime, chain_id, wallet, report)
        return
    with runtime.signer.holding(chain_id, wallet):
        claimed = nonces.apart(lambda: _claim(runtime, chain, wallet, custody_ref))
        results = send_together(runtime, chain_id, claimed)
    kept = [  # left in flight after an ambiguous failure: the next pass finishes them
        transfer_id
        for (_, transfer_id, _), result in zip(claimed, results, strict=True)
        if isinstance(result, UpstreamError) and result.ambiguous
    ]
    if kept:
        with runtime.storage.transaction() as tx:
            store.release_claims(tx, kept, runtime.now_text())
    refused = [result for result in results if isinstance(result, Exception)]
    report.add(queued_transfers_started=len(results) - len(refused))
    if refused:  # failed (a definite refusal) or kept for the evidence (an ambiguous one)
        report.add(queued_transfers_refused=len(refused))


def _claim(runtime: Runtime, chain: Chain, wallet: str, custody_ref: str) -> list[Claimed]:
    """Sign the first queued transfers whose legs fit the wallet's room, with consecutive
    nonces, and make them claims with their legs (leased to this pass); their (org_id,
    id). `NoncesTaken` when another process took their nonces or one of them first."""
    chain_id = chain.chain_id
    mined = chain.mined_nonce(wallet)
    with runtime.storage.read() as tx:
        free = runtime.max_in_flight - nonces.in_flight(tx, chain_id, wallet, mined)
        rows = store.queued(tx, chain_id, wallet, max(free, 0)) if free > 0 else []
    if not rows:
        return []
    plans = onchain.plan_swaps(runtime, chain, [swap_of(chain, row, custody_ref) for row in rows])
    taken: list[tuple[Row, onchain.Plan]] = []
    for row, plan in zip(rows, plans, strict=True):
        if isinstance(plan, Exception):
            break  # refused now (c0 cannot give that much back): it waits, and the rest
        if len(plan.legs) > free:
            break
        free -= len(plan.legs)
        taken.append((row, plan))
    if not taken:
        return []
    with runtime.storage.read() as tx:
        floor = nonces.next_free_nonce(tx, chain_id, wallet)
    nonce = max(chain.pending_nonce(wallet), floor)
    legs_of = onchain.sign_plans(runtime, chain, [plan for _, plan in taken], nonce)
    signed = [(row, plan, legs) for (row, plan), legs in zip(taken, legs_of, strict=True)]
    lease_until = to_text(runtime.now() + idempotency.LEASE)
    with runtime.storage.transaction() as tx:
        for row, plan, legs in signed:
            if not store.start_queued(tx, row["id"], lease_until, str(plan.reserve.wei)):
                raise nonces.NoncesTaken()  # another worker started it: plan again
            store.add_legs(tx, row["id"], chain_id, wallet, legs)
    return [(str(row["org_id"]), str(row["id"]), legs) for row, _, legs in signed]


def _fail_queue(runtime: Runtime, chain_id: int, wallet: str, report: Report) -> None:
    """The queued transfers of a wallet that can no longer sign fail (they were accepted:
    announced, never forgotten)."""
    lease_until = to_text(runtime.now() + idempotency.LEASE)
    with runtime.storage.transaction() as tx:
        rows = store.queued(tx, chain_id, wallet, PER_PASS)
        for row in rows:
            if store.start_queued(tx, row["id"], lease_until, row["reserve_wei"] or "0"):
                store.fail_claim(tx, row["id"], runtime.now_text(), runtime.secrets, CANNOT_SIGN)
    report.add(queued_transfers_failed=len(rows))
