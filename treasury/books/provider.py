"""Reconciliation against the fiat provider: what the books hold at the provider for each
fiat transfer (its ``provider:<id>`` account) against what the provider's own state of
that transfer says it holds.

A run compares the organization's fiat transfers on the chain that have not ended, and
every one the books still hold money at the provider for (a failed transfer awaiting its
refund). The provider holds a transfer's amount in the states of `postings.HOLDING`
(received and not paid on, or failed and not refunded), nothing in the others; the
states of `postings.UNTOLD` (a review, an error) say nothing and are not compared.

A difference is in flight while the provider's state is not the one recorded (the fiat
job has not applied it yet) or while the transfer or its provider account changed within
the last `reconcile_interval`; after that it is a ``provider_mismatch`` break of the
transfer's wallet (its source, or an on-ramp's destination) in USDC: `expected` what the
books hold at the provider for the wallet's differing transfers, `actual` what the
provider's states say, and as evidence each transfer's id followed by
``<provider transfer id>@<state>`` — what an admin's acceptance books
(`correction`). A transfer the provider does not answer for is not compared: its
wallet's break stays as it is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .._infra.runtime import Runtime
from .._records import journal
from .._records.postings import HOLDING, UNTOLD
from .._records.transfers import AtProvider, at_provider
from ..backends.fiat.base import ProviderTransfer, read_each
from ..backends.storage.base import Row, Transaction
from ..errors import UpstreamError
from ..money import to_raw
from . import store

PER_CALL = 100  # provider transfers read in one call
USDC = "USDC"  # the provider's dollars count 1:1 in USDC


@dataclass
class Difference:
    """A wallet's transfers whose provider side differs (raw USDC)."""

    wallet: str
    expected: int = 0
    actual: int = 0
    evidence: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    differences: dict[str, Difference] = field(default_factory=dict)  # by wallet
    unread: set[str] = field(default_factory=set)  # wallets with a transfer not answered
    in_flight: int = 0


def compare(runtime: Runtime, chain_id: int, org_id: str) -> Comparison:
    """Compare an organization's fiat transfers on a chain with the provider's states."""
    with runtime.storage.read() as tx:
        held = store.held_at_provider(tx, org_id, chain_id, USDC)
        transfers = at_provider(tx, org_id, chain_id, list(held))
    comparison = Comparison()
    if not transfers:
        return comparison
    decimals = runtime.chains.decimals(chain_id, USDC)
    grace = timedelta(seconds=runtime.reconcile_interval)
    now = runtime.now()
    for transfer, answer in _read(runtime, transfers):
        if answer is None:
            comparison.unread.add(transfer.address)
            continue
        if answer.state in UNTOLD:
            continue
        expected, last_at = held.get(transfer.id, (0, transfer.updated_at))
        actual = to_raw(transfer.amount, decimals) if answer.state in HOLDING else 0
        if actual == expected:
            continue
        changed = datetime.fromisoformat(max(last_at, transfer.updated_at))
        if answer.state != transfer.provider_state or now - changed < grace:
            comparison.in_flight += 1
            continue
        found = comparison.differences.setdefault(transfer.address, Difference(transfer.address))
        found.expected += expected
        found.actual += actual
        found.evidence += [transfer.id, f"{answer.id}@{answer.state}"]
    return comparison


def correction(runtime: Runtime, tx: Transaction, row: Row) -> list[tuple[str, str, int]]:
    """The postings that accept a ``provider_mismatch`` break: each transfer of its
    evidence's provider account brought to what the provider's state then said."""
    org_id, chain_id = str(row["org_id"]), int(row["chain_id"])
    evidence: list[str] = json.loads(row["evidence"])
    states = dict(zip(evidence[0::2], (e.rpartition("@")[2] for e in evidence[1::2]), strict=True))
    decimals = runtime.chains.decimals(chain_id, USDC)
    postings: list[tuple[str, str, int]] = []
    for transfer in at_provider(tx, org_id, chain_id, list(states)):
        if transfer.id not in states:
            continue
        account = journal.provider(transfer.id)
        actual = to_raw(transfer.amount, decimals) if states[transfer.id] in HOLDING else 0
        change = actual - journal.balance(tx, org_id, chain_id, account, USDC)
        postings += [(account, USDC, change), (journal.EXTERNAL, USDC, -change)]
    return postings


def _read(
    runtime: Runtime, transfers: Sequence[AtProvider]
) -> list[tuple[AtProvider, ProviderTransfer | None]]:
    """Each transfer with the provider's view of it (None: the provider did not answer
    for it), `PER_CALL` a call."""
    answered: list[tuple[AtProvider, ProviderTransfer | None]] = []
    for start in range(0, len(transfers), PER_CALL):
        batch = transfers[start : start + PER_CALL]
        views = read_each(runtime.fiat, [t.provider_transfer_id for t in batch])
        answered += [
            (t, None if isinstance(view, UpstreamError) else view)
            for t, view in zip(batch, views, strict=True)
        ]
    return answered
