"""The transfers' background jobs: finish claims a crash left, advance open transfers,
heal the nonce holes that would leave a wallet's legs waiting forever."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from .._infra import idempotency
from .._infra.clock import to_text
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import breaks, marks, nonces, postings, wallets
from .._records import transactions as tracked
from .._records.transactions import RecordTransaction
from .._records.transfers import Status
from ..backends.chain.base import Chain
from ..backends.fiat.base import ProviderTransfer, SimulatedProvider, read_each
from ..backends.storage.base import Row
from ..errors import UpstreamError
from ..evm.signing import Signed, broadcast, broadcast_each, raised, unsigned
from . import fiat, onchain, store
from .operations import STEPS

PER_PASS = 1_000  # open transfers read per job per pass
PER_CALL = 100  # provider transfers asked for in one call
#: How a failure reason names a leg, by its tracked-transaction type (swaps otherwise).
LEG_NAMES = {"approval": "approval", "other": "send"}
FILL_GAS = 21_000  # a plain ETH transfer: a nonce hole filled, a gas station's top-up
#: The token address a gas top-up's tracked transaction names: ETH itself.
ETH_ADDRESS = "0x" + "0" * 40
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
    """Job: move open transfers forward — legs a reorg removed broadcast again; on-chain
    legs by their receipts (or their nonce passing without one), fiat ones by the provider's states (read many at once,
    after a simulated provider's step);
    then cancel the provider transfers of off-ramps that failed before paying."""
    for chain_id in runtime.chains.ids():
        with report.part(f"chain {chain_id}"):
            settle_reorged(runtime, chain_id, report)
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
        views = read_each(runtime.fiat, [row["provider_transfer_id"] for row in batch])
        answered: list[tuple[Row, ProviderTransfer]] = []
        for row, view in zip(batch, views, strict=True):
            if isinstance(view, UpstreamError):
                with report.part(f"transfer {row['id']}"):
                    raise view
            else:
                answered.append((row, view))
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
    """Settle transfers whose moving leg was sent, by the receipt of whichever of its
    signed versions was mined: once it has the chain's `confirmations` blocks on top, it
    completes a swap (an off-ramp's send is the provider's to complete) or fails the
    transfer naming the leg that reverted; until then the transfer waits
    (``"confirmations"``) and the receipt's block is marked, so that a reorg is seen. The
    wallet's mined nonce passing the leg with none of its versions mined fails it as
    replaced."""
    chain = runtime.chains.get(chain_id)
    with runtime.storage.read() as tx:
        legs = {row["id"]: store.legs(tx, row["id"]) for row in rows}
        older = {row["id"]: store.versions(tx, row["id"]) for row in rows}
    watched = {
        row["id"]: [
            legs[row["id"]][-1].signed.hash,
            *older[row["id"]].get(len(legs[row["id"]]) - 1, []),
        ]
        for row in rows
    }
    mined = {wallet: chain.mined_nonce(wallet) for wallet in {r["wallet_address"] for r in rows}}
    asked = [h for row in rows for h in watched[row["id"]]]  # after the nonces
    found = dict(zip(asked, chain.receipts(asked), strict=True))
    head = chain.head() if any(found.values()) and chain.confirmations else None
    now = runtime.now_text()
    with runtime.storage.transaction() as tx:
        for row in rows:
            moving = legs[row["id"]][-1]
            receipt = next((found[h] for h in watched[row["id"]] if found[h] is not None), None)
            status: Status
            if receipt is None:
                if mined[row["wallet_address"]] <= moving.signed.nonce:
                    continue  # not mined yet
                status, fields = "failed", {"failure": onchain.Replaced().message}
            else:
                marks.put(tx, chain_id, "leg", row["id"], receipt.block_number, receipt.block_hash)
                if head is not None and head - receipt.block_number < chain.confirmations:
                    store.waits(tx, [row["id"]], "confirmations")
                    continue
                if older[row["id"]]:
                    onchain.follow_versions(tx, runtime, chain, row, legs[row["id"]])
                if receipt.status == 1:
                    if row["pairing"] == "offramp":  # sent: the provider completes it
                        postings.offramp_sent(
                            tx, runtime, row, receipt.block_number, receipt.transaction_hash
                        )
                        continue
                    status, fields = "completed", {}
                else:
                    status, fields = "failed", {"failure": _reverted(chain, legs[row["id"]])}
            if store.move(tx, row["id"], status, now, box=runtime.secrets, **fields):
                report.add({f"transfers_{status}": 1})
                if status == "completed" and receipt is not None:  # into the books
                    postings.swap_settled(
                        tx, runtime, row, receipt.block_number, receipt.transaction_hash
                    )


def settle_reorged(runtime: Runtime, chain_id: int, report: Report) -> None:
    """Legs whose block a reorg removed (their mark flagged by the reorg check): every
    leg of the transfer is broadcast again from its stored bytes (the version that was
    mined: same nonce, same hash), and the transfer waits for it as before. A transfer
    already completed never moves backwards: it is reported, and watched again."""
    with runtime.storage.read() as tx:
        gone = marks.orphaned(tx, chain_id, "leg")
    if not gone:
        return
    chain = runtime.chains.get(chain_id)
    for mark in gone:
        with report.part(f"transfer {mark.ref}"):
            with runtime.storage.read() as tx:
                row = store.get(tx, mark.ref)
                legs = store.legs(tx, mark.ref) if row is not None else []
                mined_raw = store.version_raw(tx, row["transaction_hash"]) if row else None
            signed = [leg.signed for leg in legs]
            if row is not None and row["status"] == "completed":  # before it is sent again
                with runtime.storage.transaction() as tx:
                    breaks.open_missing_movement(
                        tx,
                        transfer_id=mark.ref,
                        chain_id=chain_id,
                        block_number=mark.block_number,
                        decimals=lambda token: runtime.chains.decimals(chain_id, token),
                        now=runtime.now_text(),
                    )
            if row is not None and signed and mined_raw is not None:  # an earlier version
                last = signed[-1]
                signed[-1] = Signed(raw=mined_raw, hash=row["transaction_hash"], nonce=last.nonce)
            if row is not None and signed:
                with runtime.signer.holding(chain_id, row["wallet_address"]):
                    broadcast(chain, signed)
            with runtime.storage.transaction() as tx:
                marks.drop(tx, chain_id, "leg", mark.ref)
            report.add(legs_rebroadcast=len(signed))
            if row is not None and row["status"] == "completed":
                report.condition(
                    f"transfer {mark.ref}",
                    f"a reorg removed the leg of completed transfer {mark.ref}"
                    f" (block {mark.block_number}); its stored bytes were broadcast again",
                    count="completed_transfers_reorged",
                )


def _reverted(chain: Chain, legs: list[store.Leg]) -> str:
    """Which leg of a transfer reverted (the first whose receipt says so)."""
    receipts = chain.receipts([leg.signed.hash for leg in legs])
    reverted = next(
        (leg for leg, r in zip(legs, receipts, strict=True) if r is not None and r.status == 0),
        legs[-1],
    )
    return f"the {LEG_NAMES.get(reverted.kind, 'swap')} leg reverted (transaction {reverted.signed.hash})"


def heal_nonce_holes(runtime: Runtime, report: Report) -> None:
    """Job: no wallet's signed legs wait forever. The legs waiting at a wallet's next
    nonce (its mined count) and above are watched: a leg left unmined for the chain's
    `stuck_after_blocks` while the base fee is above its offer is replaced (the same
    payment at higher fees, `reprice`); a wallet short of ETH for them waits with
    ``"insufficient gas"``; at the next nonce it re-sends its own stored leg. Only where
    no stored leg can fill a nonce (an earlier leg refused or replaced) is a hole seen at
    two passes filled with a zero-value transaction of the wallet to itself."""
    with runtime.storage.read() as tx:
        senders = nonces.senders_waiting(tx, PER_PASS)
    tops: dict[int, Top] = {}  # each chain's head and fees, read once a pass when needed
    for found in senders:
        chain_id, sender = int(found["chain_id"]), str(found["sender"])
        with report.part(f"wallet {sender}"):
            _heal(runtime, chain_id, sender, report, tops)


@dataclass(frozen=True)
class Top:
    """A chain as one pass sees it: its head, the head's base fee (None without
    EIP-1559) and the tip the service offers now."""

    head: int
    base_fee: int | None
    tip: int

    @classmethod
    def read(cls, chain: Chain) -> Top:
        head = chain.head()
        (block,) = chain.blocks([head])
        tip = chain.offered_fees().get("maxPriorityFeePerGas", 0)
        return cls(head, None if block is None else block.base_fee, tip)


def _heal(
    runtime: Runtime, chain_id: int, sender: str, report: Report, tops: dict[int, Top]
) -> None:
    chain, now = runtime.chains.get(chain_id), runtime.now_text()
    with runtime.signer.holding(chain_id, sender):
        mined = chain.mined_nonce(sender)
        with runtime.storage.read() as tx:
            waiting = nonces.waiting(tx, chain_id, sender, mined)
        if waiting and waiting[0].nonce == mined:
            first = waiting[0]
            if first.claimed and not first.sent and (first.lease_until or "") > now:
                return  # its request is sending it
            if chain_id not in tops:
                tops[chain_id] = Top.read(chain)
            if reprice(runtime, chain, sender, waiting, report, tops[chain_id]):
                return  # replaced at higher fees, or waiting for gas or under the cap
            # the run of stored legs from the next nonce that the node does not hold (it
            # may have dropped them: its pending count stops there), in as few requests as
            # the chain takes: a payout run keeps many legs in flight
            run = _consecutive(waiting, now)
            held = chain.pending_nonce(sender)
            outcomes = broadcast_each(chain, [leg.signed for leg in run if leg.nonce >= held])
            if any(error is not None for error in outcomes):
                if any(error is not None and not error.ambiguous for error in outcomes):
                    report.add(nonce_legs_refused=1)  # the next pass looks again
                return  # a stored leg is never replaced by a filler
            with runtime.storage.transaction() as tx:  # the legs that waited for gas
                for transfer_id in dict.fromkeys(leg.transfer_id for leg in run if not leg.sent):
                    if store.sent_after_waiting(tx, transfer_id, now, runtime.secrets):
                        report.add(transfers_submitted=1)
            return
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
        fees = chain.offered_fees()
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
            for nonce in range(mined, waiting[0].nonce)  # the whole hole
        ]
        broadcast(chain, fillers)
        with runtime.storage.transaction() as tx:
            nonces.hole_closed(tx, chain_id, sender)
        report.add(nonce_holes_filled=1, nonces_filled=len(fillers))


def top_up(runtime: Runtime, chain: Chain, wallet: str, amount: int, report: Report) -> None:
    """Send `amount` wei to `wallet` from its organization's gas station, once per need:
    not while an earlier top-up of the wallet is unmined (it is settled once its receipt
    is there). The top-up is a tracked transaction of the station, type ``gas``."""
    chain_id, now = chain.chain_id, runtime.now_text()
    with runtime.storage.read() as tx:
        owner = wallets.managed_by_address(tx, wallet)
        earlier = store.open_top_up(tx, chain_id, wallet)
    if earlier is not None:
        if chain.receipts([earlier])[0] is None:
            return  # on its way
        with runtime.storage.transaction() as tx:
            store.top_up_settled(tx, earlier)
        return  # the next pass sees the wallet's new balance
    if owner is None or amount <= 0:
        return
    found = onchain.station(runtime, chain, owner["org_id"], wallet)
    if found is None:
        report.condition(
            f"wallet {wallet}",
            "its legs wait for ETH to pay their gas",
            count="wallets_without_gas",
        )
        return
    with runtime.storage.read() as tx:
        station = wallets.by_address(tx, owner["org_id"], found.address)
        floor = nonces.next_free_nonce(tx, chain_id, found.address)
    if station is None or found.eth < amount:
        report.condition(
            f"wallet {wallet}",
            f"its gas station {found.address} cannot pay its top-up",
            count="gas_stations_short",
        )
        return
    with runtime.signer.holding(chain_id, found.address):
        nonce = max(chain.pending_nonce(found.address), floor)
        signed = runtime.signer.sign(
            chain,
            custody_ref=station["custody_ref"],
            nonce=nonce,
            to=wallet,
            value=amount,
            gas=FILL_GAS,
            fees=chain.offered_fees(),
        )
        with runtime.storage.transaction() as tx:
            store.top_up_sent(tx, chain_id, wallet, found.address, signed.hash, amount, now)
            request = RecordTransaction.model_validate(
                {
                    "hash": signed.hash,
                    "type": "other",
                    "from": found.address,
                    "contract": wallet,
                    "token": ETH_ADDRESS,
                    "amount": str(amount),
                    "walletId": station["id"],
                }
            )
            tracked.insert(tx, owner["org_id"], chain_id, request, station, now, kind="gas")
        try:
            broadcast(chain, [signed])
        except UpstreamError as error:
            if not error.ambiguous:  # it never left: the next pass may try again
                with runtime.storage.transaction() as tx:
                    store.top_up_refused(tx, signed.hash)
                    tracked.forget_pending(tx, chain_id, signed.hash)
            raise
    report.add(gas_top_ups=1)


def _consecutive(waiting: list[nonces.Waiting], now: str) -> list[nonces.Waiting]:
    """The legs at consecutive nonces from the first, up to one its request is still
    sending (it broadcasts the rest itself)."""
    run: list[nonces.Waiting] = []
    for leg in waiting:
        if run and leg.nonce != run[-1].nonce + 1:
            break
        if leg.claimed and not leg.sent and (leg.lease_until or "") > now:
            break
        run.append(leg)
    return run


def reprice(
    runtime: Runtime,
    chain: Chain,
    sender: str,
    waiting: list[nonces.Waiting],
    report: Report,
    top: Top,
) -> bool:
    """Watch the legs waiting at a wallet's next nonce and above (call under its lock):
    note the pass's head (`top`) when each version is first seen waiting; with too little ETH for the
    first, its transfer waits for gas; each leg unmined for `stuck_after_blocks` while
    the base fee is above its offer is signed again with raised fees (`raised`: +12.5 %
    at least, the base fee covered, never above the chain's cap), stored write-ahead,
    then broadcast; where the cap forbids it, it waits (``"fee above cap"``). The
    transfers behind a waiting leg wait for it (``"nonce"``). True when the first leg
    waits or was replaced (nothing else to send now)."""
    chain_id, now = chain.chain_id, runtime.now_text()
    head, base_fee = top.head, top.base_fee
    sent = [leg for leg in waiting if leg.sent or not leg.claimed]
    with runtime.storage.transaction() as tx:
        for leg in sent:
            if leg.broadcast_block is None:
                store.broadcast_at(tx, chain_id, sender, leg.signed.hash, head)
        custody_ref = wallets.custody_ref(tx, sender)
    offers = {leg.signed.hash: unsigned(leg.signed.raw) for leg in sent}
    costs = [o["gas"] * o["maxFeePerGas"] + o["value"] for o in offers.values() if o is not None]
    first = offers.get(waiting[0].signed.hash)
    reason: str | None = None
    if first is not None:
        eth = onchain.eth_balance(chain, sender)
        if eth < first["gas"] * first["maxFeePerGas"] + first["value"]:
            reason = "insufficient gas"
            top_up(runtime, chain, sender, 2 * sum(costs) - eth, report)
    replaced: list[tuple[Signed, Signed]] = []
    if reason is None and base_fee is not None and custody_ref is not None:
        for leg in sent:
            offer = offers[leg.signed.hash]
            if offer is None or offer["maxFeePerGas"] >= base_fee:
                continue
            if head - (leg.broadcast_block or head) < chain.stuck_after_blocks:
                continue
            fees = raised(offer, base_fee, top.tip, chain.max_fee_per_gas)
            if fees is None:
                reason = reason or ("fee above cap" if leg is waiting[0] else None)
                break
            fields = {k: offer[k] for k in ("to", "data", "value", "gas")}
            again = runtime.signer.sign(
                chain, custody_ref=custody_ref, nonce=leg.nonce, fees=fees, **fields
            )
            replaced.append((leg.signed, again))
    if replaced:
        with runtime.storage.transaction() as tx:
            for before, after in replaced:
                if store.replace_leg(tx, chain_id, sender, before, after, now) is not None:
                    tracked.rehash(tx, chain_id, before.hash, after.hash, now)
        report.add(legs_repriced=len(replaced))
        for _, after in replaced:
            try:
                broadcast(chain, [after])
            except UpstreamError as error:  # stored: the next pass sends it again
                report.add(repriced_legs_refused=int(not error.ambiguous))
    behind = [leg.transfer_id for leg in waiting if leg.transfer_id != waiting[0].transfer_id]
    with runtime.storage.transaction() as tx:
        store.waits(tx, [waiting[0].transfer_id], reason)
        store.waits(tx, sorted(set(behind)), "nonce" if reason else None)
    return reason is not None or any(b.hash == waiting[0].signed.hash for b, _ in replaced)
