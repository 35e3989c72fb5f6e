"""Reconciliation: the journal against the chain, block by block.

A run reads, for every organization at once (or one, on demand), the chain balance of
every (managed or virtual wallet, token) at ONE height, in multicall batches of 100
balances (``aggregate3``) sent together (`multicall_at`: ⌈pairs ÷ 100⌉ ``eth_call``s),
and compares each with the journal's `posted` *at that block*: every wallet account's
running sum less what was posted for later blocks (a seek on the block index). Its cost
grows with the pairs, never with the journal's length.

The height is the head less the chain's confirmations (on a chain that keeps no history,
the in-process devnet, its head). An inflow in a block the deposit detector has not
scanned yet (above its highest cursor mark) is in flight: it will be posted as a
deposit; an outflow is never waited for.

The organization's fiat transfers are compared with the provider's own states at the same
run (`treasury.books.provider`): a difference past its grace is a ``provider_mismatch``.

A pair that ties out is remembered with its block; its open breaks at or below that
block are resolved. A pair that differs is explained from the chain's own evidence: the
token's ``Transfer`` logs into and out of the wallet since it last tied out, matched by
transaction hash with the journal's postings of those blocks:

- a posting whose transaction left no log there: ``missing_movement`` (a leg a reorg
  removed, not mined again yet); its evidence, the transfer id and the leg's hash;
- a log of the service's own transfers not posted yet (a leg being settled): in flight,
  no break;
- a log none of the organization's transfers sent, not in the books: ``unexplained_inflow``
  or ``unexplained_outflow`` (a key used elsewhere), with the log's hash;
- what no log explains (a balance changed without one): unexplained, without evidence.

One break is open per (wallet, token, kind); a later run updates it, never duplicates it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import breaks, journal, marks, wallets
from .._records.transfers import caused
from ..backends.chain.base import Chain
from ..backends.storage.base import Row
from ..errors import Conflict, UpstreamError
from ..evm.abi import BALANCE_OF
from ..evm.multicall import multicall_at
from . import provider, store

#: The kind of break the provider's side opens.
MISMATCH: breaks.Kind = "provider_mismatch"
#: keccak256("Transfer(address,address,uint256)").
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
#: How far back (blocks) the evidence of a pair that never tied out is looked for.
EVIDENCE_REACH = 10_000
LOG_RANGE = 2_000  # blocks per eth_getLogs of the evidence
ATTEMPTS = 3  # reads at the head of a chain without history, which may move meanwhile


@dataclass
class Pair:
    org_id: str
    wallet: str
    token: str  # USDC, USDT or c0
    expected: int  # the journal's posted at the height, raw
    actual: int = 0  # the chain's balance at the height, raw
    tied: int | None = None  # the block it last tied out at
    untied: bool = False  # it differed at the last run
    parts: dict[breaks.Kind, tuple[int, list[str]]] = field(default_factory=dict)
    in_flight: int = 0

    @property
    def difference(self) -> int:
        return self.actual - self.expected


@dataclass(frozen=True)
class Outcome:
    """An organization's run on a chain (`id`: its number in the organization)."""

    id: int
    org_id: str
    at: str
    chain_id: int
    block_number: int
    pairs: int
    tied_out: int
    in_flight: int
    breaks_open: int

    @property
    def tied(self) -> bool:
        return tied(self.pairs, self.tied_out, self.in_flight, self.breaks_open)


def tied(pairs: int, tied_out: int, in_flight: int, breaks_open: int) -> bool:
    """Whether a run tied out: every pair tied, no break open, nothing in flight (a
    provider difference waiting for its grace included)."""
    return tied_out == pairs and not in_flight and not breaks_open


def reconcile_books(runtime: Runtime, report: Report) -> None:
    """Job: every chain not reconciled within `reconcile_interval`, every organization at
    one height; a chain whose wallets nobody holds, or that the deposit detector has not
    scanned yet (the books start with it), costs no request."""
    interval = timedelta(seconds=runtime.reconcile_interval)
    for chain_id in runtime.chains.ids():
        with report.part(f"chain {chain_id}"):
            with runtime.storage.read() as tx:
                last = store.last_run_at(tx, chain_id)
                if last is not None and runtime.now() - datetime.fromisoformat(last) < interval:
                    continue
                if marks.highest(tx, chain_id, "cursor") is None:
                    continue  # not scanned yet: nothing the books could say
                if not wallets.held_by_organization(tx):
                    continue
            outcomes = run(runtime, chain_id)
            report.add(
                reconciliation_runs=len(outcomes),
                pairs_reconciled=sum(o.pairs for o in outcomes),
                pairs_tied_out=sum(o.tied_out for o in outcomes),
                breaks_open=sum(o.breaks_open for o in outcomes),
            )


class NotYet(Conflict):
    """The chain cannot be reconciled now (409): the deposit detector has not scanned it
    yet."""


def height(runtime: Runtime, chain: Chain) -> tuple[int, int]:
    """The block a run reads (the head less the chain's confirmations; on a chain without
    history, its head), and the block the deposit detector has scanned up to (an inflow
    above it is in flight: the detector has not reached it yet). 409 before the detector
    scanned the chain at all: the books start with it."""
    head = chain.head()
    confirmations = (
        runtime.deposit_confirmations
        if runtime.deposit_confirmations is not None
        else chain.confirmations
    )
    with runtime.storage.read() as tx:
        scanned = marks.highest(tx, chain.chain_id, "cursor")
    if scanned is None:
        raise NotYet(
            f"the deposit detector has not scanned chain {chain.chain_id} yet: the books"
            " start with it (run a pass of the jobs first)"
        )
    if not chain.keeps_history:
        return head, scanned
    return max(head - confirmations, 0), scanned


def run(runtime: Runtime, chain_id: int, org_id: str | None = None) -> list[Outcome]:
    """Reconcile every organization holding wallets on a chain (or only `org_id`) at one
    height; each organization's outcome (`org_id` gets one even without wallets)."""
    chain = runtime.chains.get(chain_id)
    tokens = {s: chain.addresses[s] for s in journal.TOKENS if s in chain.addresses}
    with runtime.storage.read() as tx:
        holders = wallets.held_by_organization(tx, org_id)
    if org_id is not None:
        holders.setdefault(org_id, [])
    listed = [
        (o, a, s) for o, addresses in sorted(holders.items()) for a in addresses for s in tokens
    ]
    calls = [(tokens[s], BALANCE_OF, (a,)) for _, a, s in listed]
    for attempt in range(ATTEMPTS):  # a chain without history answers at its head only
        block, scanned = height(runtime, chain)
        try:
            found = multicall_at(chain, calls, block)
            break
        except UpstreamError:
            if chain.keeps_history or attempt == ATTEMPTS - 1:
                raise
    actual = {
        key: 0 if answer is None else _whole(answer[0])
        for key, answer in zip(listed, found, strict=True)
    }
    outcomes = []
    for org in sorted(holders):
        pairs = _expected(runtime, chain_id, org, holders[org], list(tokens), block)
        for pair in pairs:
            pair.actual = actual[(org, pair.wallet, pair.token)]
        for pair in pairs:
            if pair.difference:
                _explain(runtime, chain, tokens[pair.token], pair, block, scanned)
        fiat = provider.compare(runtime, chain_id, org)
        outcomes.append(_record(runtime, chain_id, org, pairs, fiat, block))
    return outcomes


def _expected(
    runtime: Runtime,
    chain_id: int,
    org_id: str,
    addresses: list[str],
    tokens: list[str],
    block: int,
) -> list[Pair]:
    """The journal's posted balance at `block` of each pair (one read: the running sums
    less what was posted for later blocks)."""
    with runtime.storage.read() as tx:
        now = store.posted_now(tx, org_id, chain_id)
        later = store.posted_after(tx, org_id, chain_id, block)
        differed = store.untied(tx, org_id, chain_id)
        previous = store.last_block(tx, org_id, chain_id)  # every other pair tied there
        standing: dict[tuple[str, str], int] = {}  # a reorg may have moved a tie below it
        for row in store.open_breaks(tx, org_id, chain_id):
            key = (str(row["wallet"]), str(row["token"]))
            standing[key] = min(
                int(row["block_number"]), standing.get(key, int(row["block_number"]))
            )
    pairs = []
    for address in addresses:
        account = journal.wallet(address)
        for token in tokens:
            expected = now.get((account, token), 0) - later.get((account, token), 0)
            key = (address, token)
            pair = Pair(org_id, address, token, expected)
            pair.untied = key in differed
            pair.tied = differed[key] if pair.untied else previous
            if key in standing:  # its evidence from its oldest open break's block on
                below = standing[key] - 1
                pair.tied = below if pair.tied is None else min(pair.tied, below)
            pairs.append(pair)
    return pairs


def _explain(
    runtime: Runtime, chain: Chain, token: str, pair: Pair, block: int, scanned: int
) -> None:
    """Sort a pair's difference into kinds (`Pair.parts`) and what is in flight, from the
    token's Transfer logs of the wallet and the journal's postings since it last tied (a
    log above `scanned`, which the deposit detector has not reached, is in flight)."""
    first = pair.tied + 1 if pair.tied is not None else max(block - EVIDENCE_REACH, 0)
    padded = "0x" + pair.wallet.removeprefix("0x").rjust(64, "0")
    on_chain: dict[str, int] = defaultdict(int)
    unscanned: set[str] = set()
    directions = ((-1, [TRANSFER_TOPIC, padded]), (1, [TRANSFER_TOPIC, None, padded]))
    for start in range(first, block + 1, LOG_RANGE):
        last = min(start + LOG_RANGE - 1, block)
        for sign, topics in directions:
            for log in chain.logs(start, last, [token], topics):
                on_chain[log.transaction_hash] += sign * int.from_bytes(log.data[:32], "big")
                if log.block_number > scanned:
                    unscanned.add(log.transaction_hash)
    account = journal.wallet(pair.wallet)
    booked: dict[str, int] = defaultdict(int)
    transfers: dict[str, set[str]] = defaultdict(set)
    unhashed = 0
    with runtime.storage.read() as tx:
        rows = store.postings_between(
            tx, pair.org_id, chain.chain_id, account, pair.token, first, block
        )
        ours = caused(tx, chain.chain_id, list(on_chain))
    for row in rows:
        if row["transaction_hash"] is None:
            unhashed += int(row["amount"])
            continue
        booked[row["transaction_hash"]] += int(row["amount"])
        if row["transfer_id"] is not None:
            transfers[row["transaction_hash"]].add(str(row["transfer_id"]))
    parts: dict[breaks.Kind, list[int]] = defaultdict(lambda: [0])
    evidence: dict[breaks.Kind, list[str]] = defaultdict(list)
    explained = 0
    for tx_hash in sorted(set(on_chain) | set(booked)):
        delta = on_chain.get(tx_hash, 0) - booked.get(tx_hash, 0)
        if not delta:
            continue
        explained += delta
        if tx_hash not in on_chain:  # the books have it, the chain does not
            parts["missing_movement"][0] += delta
            evidence["missing_movement"] += [*sorted(transfers[tx_hash]), tx_hash]
        elif pair.org_id in ours.get(tx_hash, set()) or (delta > 0 and tx_hash in unscanned):
            pair.in_flight += delta  # a leg of ours being settled, a deposit not reached yet
        else:
            kind: breaks.Kind = "unexplained_inflow" if delta > 0 else "unexplained_outflow"
            parts[kind][0] += delta
            evidence[kind].append(tx_hash)
    residual = pair.difference - explained + unhashed  # what no log explains
    if residual:
        kind = "unexplained_inflow" if residual > 0 else "unexplained_outflow"
        parts[kind][0] += residual
    pair.parts = {k: (v[0], evidence[k]) for k, v in parts.items() if v[0]}


def _record(
    runtime: Runtime,
    chain_id: int,
    org_id: str,
    pairs: list[Pair],
    fiat: provider.Comparison,
    block: int,
) -> Outcome:
    """An organization's run in one transaction: ties remembered, breaks opened, updated
    and resolved (announced), the run itself."""
    now = runtime.now_text()
    decimals = {
        token: runtime.chains.decimals(chain_id, token)
        for token in {p.token for p in pairs} | {provider.USDC}
    }
    tied = 0
    in_flight = fiat.in_flight
    with runtime.storage.transaction() as tx:
        tx.lock(f"reconcile:{org_id}:{chain_id}")
        opened: dict[tuple[str, str], dict[str, Row]] = defaultdict(dict)
        for row in store.open_breaks(tx, org_id, chain_id):
            opened[(str(row["wallet"]), str(row["token"]))][str(row["kind"])] = row
        for pair in pairs:
            standing = opened.get((pair.wallet, pair.token), {})
            if not pair.difference:
                tied += 1
                if pair.untied:
                    store.retie(tx, org_id, chain_id, pair.wallet, pair.token)
            else:
                store.untie(tx, org_id, chain_id, pair.wallet, pair.token, pair.tied)
                in_flight += not pair.parts
            for kind, (amount, evidence) in pair.parts.items():
                breaks.report(
                    tx,
                    org_id=org_id,
                    kind=kind,
                    chain_id=chain_id,
                    wallet=pair.wallet,
                    token=pair.token,
                    decimals=decimals[pair.token],
                    expected=pair.expected,
                    actual=pair.expected + amount,
                    difference=amount,
                    block_number=block,
                    evidence=evidence,
                    now=now,
                )
            for named, row in standing.items():
                if named == MISMATCH:
                    continue  # the provider's side, below
                if named not in pair.parts and int(row["block_number"]) <= block:
                    breaks.resolve(tx, row, now, note=f"tied out at block {block}")
        for wallet, found in fiat.differences.items():
            breaks.report(
                tx,
                org_id=org_id,
                kind=MISMATCH,
                chain_id=chain_id,
                wallet=wallet,
                token=provider.USDC,
                decimals=decimals[provider.USDC],
                expected=found.expected,
                actual=found.actual,
                difference=found.actual - found.expected,
                block_number=block,
                evidence=found.evidence,
                now=now,
            )
        for (wallet, _), standing in opened.items():
            mismatch = standing.get(MISMATCH)
            if (
                mismatch is not None
                and wallet not in fiat.differences
                and wallet not in fiat.unread
            ):
                breaks.resolve(tx, mismatch, now, note=f"the provider agrees at block {block}")
        still = len(store.open_breaks(tx, org_id, chain_id))
        number = store.add_run(
            tx,
            org_id,
            {
                "chain_id": chain_id,
                "at": now,
                "block_number": block,
                "pairs": len(pairs),
                "tied_out": tied,
                "in_flight": in_flight,
                "breaks_open": still,
            },
        )
    return Outcome(number, org_id, now, chain_id, block, len(pairs), tied, in_flight, still)


def _whole(value: object) -> int:
    """A balance as the multicall decoded it (an int for a ``uint256``)."""
    return value if isinstance(value, int) else int(str(value))
