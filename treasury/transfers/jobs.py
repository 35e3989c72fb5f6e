"""The transfers' background jobs: finish claims a crash left, advance open transfers,
heal the nonce holes that would leave a wallet's legs waiting forever."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta

from .._infra import idempotency
from .._infra.clock import to_text
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import nonces, wallets
from .._records.transfers import Status
from ..backends.chain.base import Chain
from ..backends.fiat.base import ProviderTransfer, SimulatedProvider
from ..backends.storage.base import Row
from ..errors import UpstreamError
from ..evm.signing import broadcast
from . import fiat, onchain, store
from .operations import STEPS

PER_PASS = 1_000  # open transfers read per job per pass
PER_CALL = 100  # provider transfers asked for in one call
#: How a failure reason names a leg, by its tracked-transaction type (swaps otherwise).
LEG_NAMES = {"approval": "approval", "other": "send"}
FILL_GAS = 21_000  # a zero-value transfer of a wallet to itself, filling a nonce hole
#: The fiat job's cursor over the provider's updated transfers, and how far back of it
#: each pass asks again (a change stamped in the same instant as the last one seen).
CURSOR = "provider_transfers"
CURSOR_OVERLAP = timedelta(seconds=1)


def finish_transfers(runtime: Runtime, report: Report) -> None:
    """Job: finish the transfers whose request died after its claim (the lease passed):
    the same provider call, the same signed bytes, never a new signature."""
    for _ in range(PER_PASS):  # one at a time: each taken with a full lease of its own
        now = runtime.now()
        with runtime.storage.transaction() as tx:
            taken = store.take_expired_claims(tx, to_text(now), to_text(now + idempotency.LEASE), 1)
            transfer = store.get(tx, taken[0]["id"]) if taken else None
        if not taken:
            return
        if transfer is None:
            continue
        with report.part(f"transfer {transfer['id']}"):
            steps = STEPS[transfer["pairing"]](runtime)
            idempotency.finish(runtime, transfer["org_id"], transfer["id"], steps)
            report.add(transfers_finished=1)


def advance_transfers(runtime: Runtime, report: Report) -> None:
    """Job: move open transfers forward — on-chain legs by their receipts (or their
    nonce passing without one), fiat ones by the provider's states (read many at once,
    after a simulated provider's step);
    then cancel the provider transfers of off-ramps that failed before paying."""
    with runtime.storage.read() as tx:
        onchain_rows = store.open_onchain(tx, PER_PASS) + store.offramps_sending(tx, PER_PASS)
    by_chain = defaultdict(list)
    for row in onchain_rows:
        by_chain[int(row["chain_id"])].append(row)
    for chain_id, rows in by_chain.items():
        with report.part(f"chain {chain_id}"):
            _settle_legs(runtime, chain_id, rows, report)
    with runtime.storage.read() as tx:
        fiat_rows = store.open_fiat(tx, PER_PASS)
        unpaid = store.failed_offramps_awaiting_funds(tx, PER_PASS)
    changed = _changed_since_cursor(runtime, fiat_rows) if fiat_rows else None
    batches = [changed] if changed is not None else _read_by_id(runtime, fiat_rows, report)
    for answered in batches:
        with report.part("provider"), runtime.storage.transaction() as tx:
            for row, answer in answered:
                if (status := fiat.apply(tx, runtime, row, answer)) is not None:
                    report.add({f"transfers_{status}": 1})
        _advance_cursor(runtime, [answer for _, answer in answered])
    for row in unpaid:
        with report.part(f"transfer {row['id']}"):
            cancelled = runtime.fiat.cancel_transfer(row["provider_transfer_id"])
            state = cancelled.state if cancelled is not None else "not_cancellable"
            with runtime.storage.transaction() as tx:
                store.update(
                    tx, row["id"], runtime.now_text(), box=runtime.secrets, provider_state=state
                )
            report.add(provider_transfers_cancelled=int(state == "canceled"))


def _read_by_id(
    runtime: Runtime, rows: list[Row], report: Report
) -> Iterator[list[tuple[Row, ProviderTransfer]]]:
    """The open transfers' states, `PER_CALL` ids a call."""
    for start in range(0, len(rows), PER_CALL):
        batch = rows[start : start + PER_CALL]
        if isinstance(runtime.fiat, SimulatedProvider):  # the sandbox: its time passes
            with report.part("provider simulation"):
                runtime.fiat.advance([row["provider_transfer_id"] for row in batch])
        try:
            answers = runtime.fiat.transfers([row["provider_transfer_id"] for row in batch])
        except UpstreamError:  # one id the provider refuses must not hold up the others
            answered: list[tuple[Row, ProviderTransfer]] = []
            for row in batch:
                with report.part(f"transfer {row['id']}"):
                    (answer,) = runtime.fiat.transfers([row["provider_transfer_id"]])
                    answered.append((row, answer))
        else:
            answered = list(zip(batch, answers, strict=True))
        yield answered


def _changed_since_cursor(
    runtime: Runtime, rows: list[Row]
) -> list[tuple[Row, ProviderTransfer]] | None:
    """The open transfers the provider changed since the cursor (the latest change it
    showed, by its own clock), from its list of updated transfers, a request a page;
    None before there is a cursor (the first pass reads by id and sets it) or where the
    provider lists no such thing."""
    with runtime.storage.read() as tx:
        cursor = tx.one("SELECT position FROM fiat_cursor WHERE name = ?", (CURSOR,))
    if cursor is None:
        return None
    since = datetime.fromisoformat(cursor["position"]) - CURSOR_OVERLAP
    pages = runtime.fiat.transfers_updated_since(since)
    if pages is None:
        return None
    by_id = {row["provider_transfer_id"]: row for row in rows}
    return [(by_id[a.id], a) for page in pages for a in page if a.id in by_id]


def _advance_cursor(runtime: Runtime, answers: list[ProviderTransfer]) -> None:
    """Move the cursor to the latest change the provider showed (never back)."""
    latest = max((a.updated_at for a in answers if a.updated_at is not None), default=None)
    if latest is None:
        return
    with runtime.storage.transaction() as tx:
        found = tx.one("SELECT position FROM fiat_cursor WHERE name = ?", (CURSOR,))
        if found is None:
            tx.execute(
                "INSERT INTO fiat_cursor (name, position) VALUES (?, ?)",
                (CURSOR, latest.isoformat()),
            )
        elif datetime.fromisoformat(found["position"]) < latest:
            tx.execute(
                "UPDATE fiat_cursor SET position = ? WHERE name = ?", (latest.isoformat(), CURSOR)
            )


def _settle_legs(runtime: Runtime, chain_id: int, rows: list[Row], report: Report) -> None:
    """Settle transfers whose moving leg (`transaction_hash`) was sent: its receipt
    completes a swap (an off-ramp's send is the provider's to complete) or fails the
    transfer naming the leg that reverted; the wallet's mined nonce passing the leg
    with no receipt fails it as replaced."""
    chain = runtime.chains.get(chain_id)
    with runtime.storage.read() as tx:
        legs = {row["id"]: store.legs(tx, row["id"]) for row in rows}
    mined = {wallet: chain.mined_nonce(wallet) for wallet in {r["wallet_address"] for r in rows}}
    receipts = chain.receipts([row["transaction_hash"] for row in rows])  # after the nonces
    now = runtime.now_text()
    with runtime.storage.transaction() as tx:
        for row, receipt in zip(rows, receipts, strict=True):
            moving = legs[row["id"]][-1]
            status: Status
            if receipt is None:
                if mined[row["wallet_address"]] <= moving.signed.nonce:
                    continue  # not mined yet
                status, fields = "failed", {"failure": onchain.Replaced().message}
            elif receipt.status == 1:
                if row["pairing"] == "offramp":
                    continue  # sent: the provider completes it
                status, fields = "completed", {}
            else:
                status, fields = "failed", {"failure": _reverted(chain, legs[row["id"]])}
            if store.move(tx, row["id"], status, now, box=runtime.secrets, **fields):
                report.add({f"transfers_{status}": 1})


def _reverted(chain: Chain, legs: list[store.Leg]) -> str:
    """Which leg of a transfer reverted (the first whose receipt says so)."""
    receipts = chain.receipts([leg.signed.hash for leg in legs])
    reverted = next(
        (leg for leg, r in zip(legs, receipts, strict=True) if r is not None and r.status == 0),
        legs[-1],
    )
    return f"the {LEG_NAMES.get(reverted.kind, 'swap')} leg reverted (transaction {reverted.signed.hash})"


def heal_nonce_holes(runtime: Runtime, report: Report) -> None:
    """Job: no wallet's signed legs wait forever behind a nonce nothing will fill. At a
    wallet's next nonce (its mined count) it re-sends its own stored leg; where it has
    none (an earlier leg refused, dropped or replaced), a hole seen at two passes is
    filled with a zero-value transaction of the wallet to itself."""
    with runtime.storage.read() as tx:
        senders = nonces.senders_waiting(tx, PER_PASS)
    for found in senders:
        chain_id, sender = int(found["chain_id"]), str(found["sender"])
        with report.part(f"wallet {sender}"):
            _heal(runtime, chain_id, sender, report)


def _heal(runtime: Runtime, chain_id: int, sender: str, report: Report) -> None:
    chain, now = runtime.chains.get(chain_id), runtime.now_text()
    with runtime.signer.holding(chain_id, sender):
        mined = chain.mined_nonce(sender)
        with runtime.storage.read() as tx:
            waiting = nonces.waiting(tx, chain_id, sender, mined)
        if waiting and waiting[0].nonce == mined:
            first = waiting[0]
            if first.claimed and not first.sent and (first.lease_until or "") > now:
                return  # its request is sending it
            try:
                broadcast(chain, [first.signed])
                return  # held by the node now (or already): the rest follow
            except UpstreamError as error:
                if error.ambiguous:
                    return
                report.add(nonce_legs_refused=1)  # refused: fill its nonce instead
        if not waiting:
            with runtime.storage.transaction() as tx:
                nonces.hole_closed(tx, chain_id, sender)
            return
        with runtime.storage.transaction() as tx:
            seen = nonces.hole_seen(tx, chain_id, sender, mined, now)
            custody_ref = wallets.custody_ref(tx, sender)
        if not seen or custody_ref is None:
            report.add(nonce_holes_seen=1)
            return
        end = waiting[0].nonce if waiting[0].nonce > mined else mined + 1  # a refused leg's
        fees, gap = chain.fee_fields(), range(mined, end)  # the whole hole
        fillers = [
            runtime.signer.sign(
                chain,
                custody_ref=custody_ref,
                nonce=nonce,
                to=sender,
                value=0,
                gas=FILL_GAS,
                fees=fees,
            )
            for nonce in gap
        ]
        broadcast(chain, fillers)
        with runtime.storage.transaction() as tx:
            nonces.hole_closed(tx, chain_id, sender)
        report.add(nonce_holes_filled=1, nonces_filled=len(fillers))
