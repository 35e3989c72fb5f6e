"""The deposit detector job: incoming USDC, USDT and c0 into the organizations' wallets.

Per chain, from a stored cursor, it reads the tokens' ``Transfer`` logs with one
``eth_getLogs`` per bounded block range (`RANGE`), whatever the number of wallets: the
watched addresses go into the query's recipient topic when they are few (`TOPIC_LIMIT`);
above that the query takes every Transfer log of the tokens, and only the recipients of
a range's logs are looked up (by address), so no pass reads every wallet. A block is scanned once it has `confirmations` blocks on
top. A log that a transfer of the service caused (one of its legs, an on-ramp's payout)
is not a deposit. Each range's deposits, their ``deposit.received`` events and the
cursor's advance are written in one storage transaction under a per-chain lock; a row
per (chain, hash, logIndex, organization) makes each announced once.
"""

from __future__ import annotations

from .._infra.chains import TokenMetadata
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import wallets
from .._records.events import emit
from .._records.transfers import caused
from ..backends.chain.base import Chain, Log
from ..backends.storage.base import Transaction
from ..money import to_units
from . import store

#: keccak256("Transfer(address,address,uint256)"), the ERC-20 transfer event's topic.
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
RANGE = 500  # blocks per eth_getLogs (public nodes commonly allow 500 to 10,000)
PASS_BLOCKS = 20_000  # blocks scanned per chain per pass, at most: a pass stays short
TOPIC_LIMIT = 500  # watched addresses sent in the topic filter; above it, matched here
TOKENS = ("USDC", "USDT", "c0")


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
    safe = chain.head() - confirmations(runtime, chain)
    with runtime.storage.read() as tx:
        first = store.cursor(tx, chain_id)
        count = wallets.watched_count(tx)
        few = wallets.watched(tx) if count <= TOPIC_LIMIT else None  # else: per range
    if first is None:
        with runtime.storage.transaction() as tx:
            store.start(tx, chain_id, max(safe + 1, 0), runtime.now_text())
        return counts
    tokens = {chain.addresses[s]: s for s in TOKENS if s in chain.addresses}
    metadata = _metadata(runtime, chain, list(tokens))
    topic = None if few is None else [_padded(address) for address in sorted(few)]
    end = min(safe, first + PASS_BLOCKS - 1)
    while first <= end:
        last = min(first + RANGE - 1, end)
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
            counts["deposits_received"] += _record(runtime, tx, chain_id, logs, watched, metadata)
            store.advance(tx, chain_id, last + 1, runtime.now_text())
        counts["blocks_scanned"] += last - first + 1
        first = last + 1
    return counts


def _record(
    runtime: Runtime,
    tx: Transaction,
    chain_id: int,
    logs: list[Log],
    watched: dict[str, list[str]],
    metadata: dict[str, TokenMetadata],
) -> int:
    transfers = _transfers(logs)
    ours = caused(tx, chain_id, [log.transaction_hash for log in transfers])
    now, made = runtime.now_text(), 0
    for log in transfers:
        to, sender = _address(log.topics[2]), _address(log.topics[1])
        if log.transaction_hash in ours or to not in watched:
            continue
        raw, meta = int.from_bytes(log.data[:32], "big"), metadata[log.contract]
        for org_id in watched[to]:
            recorded = store.insert(
                tx,
                chain_id=chain_id,
                tx_hash=log.transaction_hash,
                log_index=log.log_index,
                org_id=org_id,
                address=to,
                token=log.contract,
                raw=raw,
                sender=sender,
                block_number=log.block_number,
                now=now,
            )
            if not recorded:
                continue
            data = {
                "chainId": chain_id,
                "address": to,
                "token": meta.symbol,
                "tokenAddress": log.contract,
                "amount": to_units(raw, meta.decimals),
                "raw": str(raw),
                "from": sender,
                "transactionHash": log.transaction_hash,
                "logIndex": log.log_index,
                "blockNumber": log.block_number,
            }
            emit(
                tx,
                org_id=org_id,
                event_type="deposit.received",
                wallet_address=to,
                data=data,
                now=now,
            )
            made += 1
    return made


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
