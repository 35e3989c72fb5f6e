"""The transfers' background jobs: finish claims a crash left, advance open transfers."""

from __future__ import annotations

from collections import defaultdict

from .._infra import idempotency
from .._infra.clock import to_text
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._infra.sql import take_expired_leases
from ..backends.fiat.base import ProviderTransfer
from ..backends.storage.base import Row
from ..errors import UpstreamError
from . import fiat, store
from .operations import STEPS

PER_PASS = 1_000  # open transfers read per job per pass
PER_CALL = 100  # provider transfers asked for in one call


def finish_transfers(runtime: Runtime, report: Report) -> None:
    """Job: finish the transfers whose request died after its claim (the lease passed):
    the same provider call, the same signed bytes, never a new signature."""
    for _ in range(PER_PASS):  # one at a time: each taken with a full lease of its own
        now = runtime.now()
        with runtime.storage.transaction() as tx:
            taken = take_expired_leases(
                tx, "transfers", "id", "stage = 'claimed'", to_text(now),
                to_text(now + idempotency.LEASE), 1,
            )  # fmt: skip
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
    """Job: move open transfers forward — fiat ones by the provider's states (read many
    at once), on-chain ones by their swap's receipt."""
    with runtime.storage.read() as tx:
        fiat_rows = store.open_fiat(tx, PER_PASS)
        onchain_rows = store.open_onchain(tx, PER_PASS)
    for start in range(0, len(fiat_rows), PER_CALL):
        batch = fiat_rows[start : start + PER_CALL]
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
        with report.part("provider"), runtime.storage.transaction() as tx:
            for row, answer in answered:
                if (status := fiat.apply(tx, runtime, row, answer)) is not None:
                    report.add({f"transfers_{status}": 1})
    by_chain = defaultdict(list)
    for row in onchain_rows:
        by_chain[int(row["chain_id"])].append(row)
    for chain_id, rows in by_chain.items():
        with report.part(f"chain {chain_id}"):
            receipts = runtime.chains.get(chain_id).receipts([r["transaction_hash"] for r in rows])
            now = runtime.now_text()
            with runtime.storage.transaction() as tx:
                for row, receipt in zip(rows, receipts, strict=True):
                    if receipt is None:
                        continue
                    status = "completed" if receipt.status == 1 else "failed"
                    if store.move(tx, row["id"], status, now):
                        report.add({f"transfers_{status}": 1})
