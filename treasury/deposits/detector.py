"""The deposit detector job: incoming USDC, USDT and c0 into the organizations' wallets.

Per chain, from a stored cursor, it reads the tokens' ``Transfer`` logs with one
``eth_getLogs`` per bounded block range (`RANGE`), whatever the number of wallets: the
watched addresses go into the query's recipient topic when they are few (`TOPIC_LIMIT`);
above that the query takes every Transfer log of the tokens, and only the recipients of
a range's logs are looked up (by address), so no pass reads every wallet. A block is
scanned once it has `confirmations` blocks on top. Each range's deposits, their
``deposit.received`` events and the cursor's advance are written in one storage
transaction under a per-chain lock; a row per (chain, hash, logIndex, organization)
makes each announced once.

What is not a deposit (DESIGN §3 "The chain can go back"): a log of value 0 (address
poisoning); a log that a transfer of the same organization caused (one of its legs, an
on-ramp's payout), while another organization's transfer into its wallet is its deposit;
and a USDC log that matches an open on-ramp of the organization into that wallet (same
amount) is held (`store.hold`), neither announced nor forgotten, until that on-ramp
settles: paid by it, it was the on-ramp's; else, or after `HOLD`, a deposit.

Reorgs: every deposit recorded and every range's end keep a chain mark (block number and
hash); the reorg check (`treasury.reorgs`) flags those whose block left the chain. At
the start of its pass on a chain the detector takes the cursor back to just after the
highest cursor mark that still matches (below every flagged mark), reverses each
announced deposit whose mark was flagged (``deposit.reversed``, once), and never lets
the cursor stand beyond the head. A reversed deposit whose log comes back (same chain,
hash, logIndex) is the same deposit, counted and announced again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from .._infra.chains import TokenMetadata
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import marks, postings, wallets
from .._records.events import emit
from .._records.transfers import OpenOnramp, caused, open_onramps
from ..backends.chain.base import Chain, Log
from ..backends.storage.base import Row, Transaction
from ..money import to_units
from . import store

#: keccak256("Transfer(address,address,uint256)"), the ERC-20 transfer event's topic.
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
RANGE = 500  # blocks per eth_getLogs (public nodes commonly allow 500 to 10,000)
PASS_BLOCKS = 20_000  # blocks scanned per chain per pass, at most: a pass stays short
TOPIC_LIMIT = 500  # watched addresses sent in the topic filter; above it, matched here
TOKENS = ("USDC", "USDT", "c0")
#: How long a log that matches an open on-ramp is held before it counts as a deposit.
HOLD = timedelta(hours=24)


def detect_deposits(runtime: Runtime, report: Report) -> None:
    """Job: scan every configured chain; a failing chain does not stop the others."""
    for chain_id in runtime.chains.ids():
        with report.part(f"chain {chain_id}"):
            report.add(scan_chain(runtime, chain_id))


def confirmations(runtime: Runtime, chain: Chain) -> int:
    """Blocks on top of a log's block before it counts: the `deposit_confirmations`
    setting, else the chain's own (`ChainConfig.confirmations`)."""
    if runtime.deposit_confirmations is not None:
        return runtime.deposit_confirmations
    return chain.confirmations


def scan_chain(runtime: Runtime, chain_id: int) -> dict[str, int]:
    """Scan a chain from its cursor to its confirmed head; the counts. At the first
    pass the cursor starts at the confirmed head: earlier history is not replayed."""
    chain = runtime.chains.get(chain_id)
    counts = {"deposits_received": 0, "blocks_scanned": 0}
    head = chain.head()
    safe = head - confirmations(runtime, chain)
    with runtime.storage.read() as tx:
        first = store.cursor(tx, chain_id)
        count = wallets.watched_count(tx)
        few = wallets.watched(tx) if count <= TOPIC_LIMIT else None  # else: per range
        flagged = bool(marks.orphaned(tx, chain_id, "deposit"))
        flagged = flagged or bool(marks.orphaned(tx, chain_id, "cursor"))
        holding = store.holding(tx, chain_id)
    if first is None:
        with runtime.storage.transaction() as tx:
            store.start(tx, chain_id, max(safe + 1, 0), runtime.now_text())
        return counts
    tokens = {chain.addresses[s]: s for s in TOKENS if s in chain.addresses}
    metadata = _metadata(runtime, chain, list(tokens))
    if flagged or first > head + 1:
        with runtime.storage.transaction() as tx:
            tx.lock(f"deposits:{chain_id}")
            counts["deposits_reversed"] = _go_back(runtime, tx, chain_id, head, safe, metadata)
            first = store.cursor(tx, chain_id)
            assert first is not None
    if holding:
        with runtime.storage.transaction() as tx:
            tx.lock(f"deposits:{chain_id}")
            counts["deposits_received"] += _settle_held(runtime, tx, chain, metadata)
    topic = None if few is None else [_padded(address) for address in sorted(few)]
    end = min(safe, first + PASS_BLOCKS - 1)
    ranges = [(b, min(b + RANGE - 1, end)) for b in range(first, end + 1, RANGE)]
    # the ends' hashes before their logs: a reorg in between leaves a mark that fails
    ends = chain.blocks([last for _, last in ranges]) if count and ranges else []
    for index, (first, last) in enumerate(ranges):
        logs: list[Log] = []
        if count:
            logs = chain.logs(first, last, list(tokens), [TRANSFER_TOPIC, None, topic])
        with runtime.storage.transaction() as tx:
            tx.lock(f"deposits:{chain_id}")
            if store.cursor(tx, chain_id) != first:
                return counts  # another worker scanned this range meanwhile
            watched = few
            if watched is None:  # many wallets: only the recipients of these logs
                watched = wallets.watched(tx, [_address(log.topics[2]) for log in _transfers(logs)])
            counts["deposits_received"] += _record(runtime, tx, chain, logs, watched, metadata)
            store.advance(tx, chain_id, last + 1, runtime.now_text())
            block = ends[index] if ends else None
            if block is not None:  # scanned up to here, on this block
                marks.put(tx, chain_id, "cursor", str(last), last, block.hash)
        counts["blocks_scanned"] += last - first + 1
    return counts


def _go_back(
    runtime: Runtime,
    tx: Transaction,
    chain_id: int,
    head: int,
    safe: int,
    metadata: dict[str, TokenMetadata],
) -> int:
    """Act on the chain going back: the cursor to just after the highest cursor mark
    still on the chain below every flagged mark (or to the lowest flagged mark's block
    when none is), never beyond the head; each announced deposit whose log's block left
    the chain reversed and announced once. The handled marks are dropped; how many
    deposits were reversed."""
    cursor = store.cursor(tx, chain_id)
    assert cursor is not None
    deposits = marks.orphaned(tx, chain_id, "deposit")
    cursors = marks.orphaned(tx, chain_id, "cursor")
    target = cursor
    if deposits or cursors:
        fork = min(mark.block_number for mark in [*deposits, *cursors])
        kept = [
            mark.block_number
            for mark in marks.within(tx, chain_id, 0)
            if mark.kind == "cursor" and mark.block_number < fork
        ]
        target = min(target, max(kept) + 1 if kept else fork)
    if target > head + 1:  # the chain shortened with no mark in reach: back to its head
        target = max(min(head, safe + 1), 0)
    now, made = runtime.now_text(), 0
    for mark in deposits:
        tx_hash, _, index = mark.ref.rpartition(":")
        for row in store.found(tx, chain_id, tx_hash, int(index)):
            if store.reverse(tx, chain_id, tx_hash, int(index), row["org_id"], now):
                data = {**_data(chain_id, row, metadata), "reason": "reorg"}
                _announce(tx, row["org_id"], "deposit.reversed", data, now)
                postings.deposit(  # out of the books again
                    tx,
                    fields={
                        "chain_id": chain_id,
                        "tx_hash": tx_hash,
                        "log_index": int(index),
                        "org_id": row["org_id"],
                        "address": row["address"],
                        "raw": row["raw"],
                        "block_number": row["block_number"],  # where it was counted
                    },
                    token=_symbol(runtime.chains.get(chain_id), row["token"]),
                    kind="deposit",
                    now=now,
                    reversed_=True,
                )
                made += 1
        marks.drop(tx, chain_id, "deposit", mark.ref)
    for mark in cursors:
        marks.drop(tx, chain_id, "cursor", mark.ref)
    for mark in marks.within(tx, chain_id, target):  # ranges to be scanned again
        if mark.kind == "cursor":
            marks.drop(tx, chain_id, "cursor", mark.ref)
    store.rewind(tx, chain_id, target, now)
    return made


def _record(
    runtime: Runtime,
    tx: Transaction,
    chain: Chain,
    logs: list[Log],
    watched: dict[str, list[str]],
    metadata: dict[str, TokenMetadata],
) -> int:
    """Record a range's deposits (and hold the logs an open on-ramp may have paid); how
    many were announced."""
    chain_id = chain.chain_id
    transfers = [log for log in _transfers(logs) if _raw(log) > 0]  # 0: never a deposit
    ours = caused(tx, chain_id, [log.transaction_hash for log in transfers])
    found = [
        (log, org_id)
        for log in transfers
        for org_id in watched.get(_address(log.topics[2]), [])
        if org_id not in ours.get(log.transaction_hash, set())
    ]
    usdc = chain.addresses.get("USDC")
    paying = [org_id for log, org_id in found if log.contract == usdc]
    onramps = open_onramps(tx, chain_id, paying) if paying else []
    now, made = runtime.now_text(), 0
    for log, org_id in found:
        fields = _fields(chain_id, log, org_id)
        if log.contract == usdc and _matching(onramps, fields, metadata[log.contract]):
            store.hold(tx, fields, log.block_hash, now)
            continue
        made += _deposit(tx, chain, fields, log.block_hash, metadata, now)
    return made


def _settle_held(
    runtime: Runtime, tx: Transaction, chain: Chain, metadata: dict[str, TokenMetadata]
) -> int:
    """Look at the held logs again: one that a transfer of its organization paid (the
    on-ramp's payout) is let go; one that no open on-ramp matches any more, or held for
    `HOLD`, becomes a deposit. How many deposits were announced."""
    chain_id = chain.chain_id
    rows = store.held(tx, chain_id)
    if not rows:
        return 0
    ours = caused(tx, chain_id, [row["hash"] for row in rows])
    onramps = open_onramps(tx, chain_id, [row["org_id"] for row in rows])
    now, made = runtime.now(), 0
    for row in rows:
        fields = {
            "chain_id": chain_id,
            "tx_hash": row["hash"],
            "log_index": int(row["log_index"]),
            "org_id": row["org_id"],
            "address": row["address"],
            "token": row["token"],
            "raw": int(row["raw"]),
            "sender": row["sender"],
            "block_number": int(row["block_number"]),
        }
        if row["org_id"] in ours.get(row["hash"], set()):  # the on-ramp's payout
            store.release(tx, chain_id, row["hash"], fields["log_index"], row["org_id"])
            continue
        expired = now - datetime.fromisoformat(row["first_seen"]) >= HOLD
        if not expired and _matching(onramps, fields, metadata[row["token"]]):
            continue
        store.release(tx, chain_id, row["hash"], fields["log_index"], row["org_id"])
        made += _deposit(tx, chain, fields, row["block_hash"], metadata, runtime.now_text())
    return made


def _deposit(
    tx: Transaction,
    chain: Chain,
    fields: dict[str, Any],
    block_hash: str,
    metadata: dict[str, TokenMetadata],
    now: str,
) -> int:
    """Record a log as a deposit of an organization and announce it, with its chain mark;
    a reversed deposit whose log came back is counted and announced again. 1 if it was
    announced, 0 if it had been before."""
    chain_id, tx_hash, log_index = fields["chain_id"], fields["tx_hash"], fields["log_index"]
    org_id = fields["org_id"]
    fresh = store.insert(tx, fields, now) or store.restore(
        tx, chain_id, tx_hash, log_index, org_id, fields["block_number"]
    )
    if block_hash:  # kept (or moved to the log's block now) for the reorg check
        ref = f"{tx_hash}:{log_index}"
        marks.put(tx, chain_id, "deposit", ref, fields["block_number"], block_hash)
    if not fresh:
        return 0
    paid_by = chain.addresses.get("yield_distributor")
    postings.deposit(  # into the books, in the transaction that records it
        tx,
        fields=fields,
        token=_symbol(chain, fields["token"]),
        kind="yield_claim" if paid_by is not None and fields["sender"] == paid_by else "deposit",
        now=now,
    )
    row = {
        "hash": tx_hash,
        "log_index": log_index,
        "address": fields["address"],
        "token": fields["token"],
        "raw": str(fields["raw"]),
        "sender": fields["sender"],
        "block_number": fields["block_number"],
    }
    _announce(tx, org_id, "deposit.received", _data(chain_id, row, metadata), now)
    return 1


def _announce(tx: Transaction, org_id: str, event: str, data: dict[str, Any], now: str) -> None:
    emit(
        tx,
        org_id=org_id,
        event_type=event,
        wallet_address=str(data["address"]),
        data=data,
        now=now,
    )


def _data(chain_id: int, row: Row, metadata: dict[str, TokenMetadata]) -> dict[str, Any]:
    """A deposit as its events carry it."""
    meta = metadata[row["token"]]
    return {
        "chainId": chain_id,
        "address": row["address"],
        "token": meta.symbol,
        "tokenAddress": row["token"],
        "amount": to_units(int(row["raw"]), meta.decimals),
        "raw": str(row["raw"]),
        "from": row["sender"],
        "transactionHash": row["hash"],
        "logIndex": int(row["log_index"]),
        "blockNumber": int(row["block_number"]),
    }


def _fields(chain_id: int, log: Log, org_id: str) -> dict[str, Any]:
    """A log's deposit of an organization, as the store takes it."""
    return {
        "chain_id": chain_id,
        "tx_hash": log.transaction_hash,
        "log_index": log.log_index,
        "org_id": org_id,
        "address": _address(log.topics[2]),
        "token": log.contract,
        "raw": _raw(log),
        "sender": _address(log.topics[1]),
        "block_number": log.block_number,
    }


def _matching(onramps: list[OpenOnramp], fields: dict[str, Any], meta: TokenMetadata) -> bool:
    """Whether an open on-ramp of the log's organization pays this amount to its wallet."""
    amount = Decimal(to_units(fields["raw"], meta.decimals))
    return any(
        o.org_id == fields["org_id"] and o.address == fields["address"] and o.amount == amount
        for o in onramps
    )


def _symbol(chain: Chain, token: str) -> str:
    """A token's name in the books (``USDC``, ``USDT``, ``c0``) from its address."""
    return next((s for s in TOKENS if chain.addresses.get(s) == token), token)


def _raw(log: Log) -> int:
    return int.from_bytes(log.data[:32], "big")


def _metadata(runtime: Runtime, chain: Chain, tokens: list[str]) -> dict[str, TokenMetadata]:
    """The tokens' symbols and decimals, read from the chain once (then cached)."""
    known = runtime.chains.metadata(chain.chain_id, tokens)
    for token in tokens:
        if token not in known:
            raise ValueError(f"token {token} did not answer its name, symbol and decimals")
    return known


def _transfers(logs: list[Log]) -> list[Log]:
    """ERC-20 Transfer logs (an ERC-721 one has a fourth topic, the token id)."""
    return [log for log in logs if len(log.topics) == 3 and log.topics[0] == TRANSFER_TOPIC]


def _padded(address: str) -> str:
    return "0x" + address.removeprefix("0x").rjust(64, "0")


def _address(topic: str) -> str:
    return "0x" + topic[-40:]
