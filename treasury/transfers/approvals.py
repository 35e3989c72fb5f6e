"""The approvals' jobs: start the approved transfers, expire those left unanswered.

An approved transfer starts as any transfer does after its claim: a swap's legs are
signed now (they were not while it awaited; a pass that finds its wallet without room
among its legs in flight, `runs`, leaves it for a later one), stored with it as it becomes a claim
(stage ``claimed``, leased to this pass), then the same perform and record as a request
(`idempotency.finish`); a crash after that is finished by `finish_transfers`. A transfer
awaiting a decision for 72 hours fails with ``"approval expired"``.
"""

from __future__ import annotations

from datetime import timedelta

from .._infra import idempotency
from .._infra.clock import to_text
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import nonces, wallets
from .._records.transfers import RECORDED
from ..backends.storage.base import Row
from . import onchain, runs, store
from .models import ONCHAIN
from .operations import STEPS

#: How long a transfer waits for its decision before it fails.
APPROVAL_WINDOW = timedelta(hours=72)
EXPIRED = "approval expired"
PER_PASS = 1_000


def start_approved_transfers(runtime: Runtime, report: Report) -> None:
    """Job: execute the transfers approved since the last pass."""
    with runtime.storage.read() as tx:
        rows = store.approved_unstarted(tx, PER_PASS)
    for row in rows:
        with report.part(f"transfer {row['id']}"):
            if _claim(runtime, row):
                steps = STEPS[row["pairing"]](runtime)
                idempotency.finish(runtime, row["org_id"], row["id"], steps)
                report.add(approved_transfers_started=1)


def _claim(runtime: Runtime, row: Row) -> bool:
    """Make an approved transfer a claim (a swap's legs signed and stored with it); False
    when another worker did first."""
    lease_until = to_text(runtime.now() + idempotency.LEASE)
    if row["pairing"] not in ONCHAIN:
        with runtime.storage.transaction() as tx:
            return store.start(tx, row["id"], lease_until)
    chain_id, wallet = int(row["chain_id"]), str(row["wallet_address"])
    chain = runtime.chains.get(chain_id)
    with runtime.storage.read() as tx:
        custody_ref = wallets.custody_ref(tx, wallet)
    if custody_ref is None:
        with runtime.storage.transaction() as tx:
            store.start(tx, row["id"], lease_until)
            store.fail_claim(
                tx, row["id"], runtime.now_text(), runtime.secrets, "the wallet can no longer sign"
            )
        return False
    deposit = row["pairing"] == "deposit"
    usdc, c0 = chain.addresses["USDC"], chain.addresses["c0"]
    swap = onchain.Swap(
        chain_id=chain_id,
        wallet=wallet,
        custody_ref=custody_ref,
        token_in=usdc if deposit else c0,
        token_out=c0 if deposit else usdc,
        raw=int(row["reserve_raw"]),
        recipient=str(store.Side.loads(row["destination"]).address),
        swap_kind="deposit" if deposit else "withdrawal",
    )

    def sign_and_store() -> bool:
        legs, reserve = onchain.sign_legs(runtime, chain, swap)
        with runtime.storage.transaction() as tx:
            if not store.start(tx, row["id"], lease_until, reserve_wei=str(reserve.wei)):
                return False
            store.add_legs(tx, row["id"], chain_id, wallet, legs)
        return True

    with runtime.signer.holding(chain_id, wallet):
        if not runs.has_room(runtime, chain, wallet):  # its wallet's legs in flight: later
            return False
        return nonces.apart(sign_and_store)


def expire_approvals(runtime: Runtime, report: Report) -> None:
    """Job: fail the transfers that awaited a decision for `APPROVAL_WINDOW`."""
    now = runtime.now()
    with runtime.storage.read() as tx:
        rows = store.awaiting_before(tx, to_text(now - APPROVAL_WINDOW), PER_PASS)
    for row in rows:
        with runtime.storage.transaction() as tx:
            if store.decide(tx, row["id"], "expired"):
                store.move(
                    tx,
                    row["id"],
                    "failed",
                    to_text(now),
                    box=runtime.secrets,
                    stage=RECORDED,
                    failure=EXPIRED,
                )
                report.add(transfer_approvals_expired=1)
