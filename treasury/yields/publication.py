"""The publication job: at the first pass after a period ends, build its artifact and
freeze it (DESIGN §3 "Yield distributions").

The artifact is an OpenZeppelin ``StandardMerkleTree`` (standard-v1) over leaves
``(uint256 index, address account, uint256 amount)``, index = position in ascending
account order, with every holder's amount from `periods.amounts`. It is stored as the
exact JSON body the API serves, and never rebuilt: a second attempt (another worker, a
later pass) changes nothing. A period without claims is recorded as built, and not
listed.

Where we operate the chain's distributor, each published root is then posted with the
period's total in c0 (`post_roots`): the key is a test chain's `MintingChain.minter_key` (the
devnet's deployer, or the ``minter_key`` of an anvil node under ``treasury devnet``), and
it is ours only when the distributor's ``operator()`` is that key's address. The period's
total is minted to the distributor, then ``postRoot`` sent, each signed with that key and
sent through the chain's primitives; a root found already posted is recorded.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

from .._infra.imports import load
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from ..backends.chain.base import Chain, Reverted
from ..backends.chain.minting import MintingChain
from ..errors import UpstreamError
from ..evm.abi import MINT, OPERATOR, POST_ROOT, ROOTS
from ..evm.merkle import StandardMerkleTree
from . import store
from .models import YieldLeaf, YieldPeriod
from .periods import amounts, bounds, period_of

LEAF_ENCODING = ["uint256", "address", "uint256"]
PERIODS_PER_PASS = 8  # a worker back from a long outage catches up over a few passes
MINED_WITHIN = 60.0  # seconds a posting's transaction may take to be mined
_POSTING = threading.Lock()  # one poster per process: the operator's nonces in order


def publish_yield_periods(runtime: Runtime, report: Report) -> None:
    """Job: build every ended period of each chain that is not built yet."""
    for chain_id in runtime.chains.ids():
        with report.part(f"chain {chain_id}"):
            report.add(yield_periods_published=publish_chain(runtime, chain_id))


def publish_chain(runtime: Runtime, chain_id: int) -> int:
    """Build the ended periods of `chain_id` since its first snapshot; how many were
    published with claims."""
    current = period_of(runtime.now())
    with runtime.storage.read() as tx:
        first, _ = store.snapshot_times(tx, chain_id)
        if first is None:
            return 0
        low = period_of(first)
        built = store.built_periods(tx, chain_id, low, current)
    published = 0
    for period_id in [p for p in range(low, current) if p not in built][:PERIODS_PER_PASS]:
        published += publish_period(runtime, chain_id, period_id)
    post_roots(runtime, chain_id)
    return published


def post_roots(runtime: Runtime, chain_id: int) -> None:
    """Post every published root not posted yet, where we operate the distributor; a
    crash between a posting and its record is found on the chain (the distributor
    keeps one root)."""
    chain = runtime.chains.get(chain_id)
    if "yield_distributor" not in chain.addresses or not isinstance(chain, MintingChain):
        return
    with _POSTING:
        with runtime.storage.read() as tx:
            pending = store.unposted(tx, chain_id)
        for row in pending:
            period_id = int(row["period_id"])
            tx_hash = post_root(chain, period_id, str(row["root"]), int(row["total"]))
            if tx_hash is None:
                return
            with runtime.storage.transaction() as tx:
                store.posted(tx, chain_id, period_id, tx_hash)


def post_root(chain: Chain, period_id: int, root: str, total: int) -> str | None:
    """Give the chain's distributor `total` raw c0 and post `root` for `period_id`, where
    we operate it; the mined posting's hash ("" when that root was posted already), or
    None where we do not (no distributor, no key of a test chain, another operator)."""
    distributor = chain.addresses.get("yield_distributor")
    if distributor is None or not isinstance(chain, MintingChain):
        return None
    operator = load("eth_account").Account.from_key(chain.minter_key)
    (current,) = OPERATOR.decode(chain.call(distributor, OPERATOR.encode()))
    if str(current).lower() != operator.address.lower():
        return None  # another account operates this distributor
    (onchain,) = ROOTS.decode(chain.call(distributor, ROOTS.encode(period_id)))
    if "0x" + bytes(onchain).hex() == root:
        return ""  # posted before its record: the hash is not known
    _send(chain, operator, chain.addresses["c0"], MINT.encode(distributor, total))
    post = POST_ROOT.encode(period_id, bytes.fromhex(root.removeprefix("0x")))
    return _send(chain, operator, distributor, post)


def _send(chain: Chain, operator: Any, to: str, data: bytes) -> str:
    """Sign a call with `operator` (an eth-account key), send it, wait until mined; its
    hash."""
    tx_hash = _signed_and_sent(chain, operator, to, data)
    deadline = time.monotonic() + MINED_WITHIN
    while (receipt := chain.receipts([tx_hash])[0]) is None:
        if time.monotonic() > deadline:
            raise UpstreamError(f"{tx_hash} was not mined within {MINED_WITHIN:.0f} s")
        time.sleep(0.05)
    if receipt.status != 1:
        raise Reverted(f"the distributor's transaction {tx_hash} reverted")
    return tx_hash


def _signed_and_sent(chain: Chain, operator: Any, to: str, data: bytes) -> str:
    """Sign at the pending nonce and broadcast; a nonce taken meanwhile (the faucet sends
    from the same account) is signed again."""
    from eth_utils.address import to_checksum_address

    call = {"from": operator.address, "to": to, "data": data}
    for attempt in range(3):
        transaction = {
            "chainId": chain.chain_id,
            "nonce": chain.pending_nonce(operator.address),
            "to": to_checksum_address(to),  # eth-account refuses all-lowercase
            "data": data,
            "value": 0,
            "gas": chain.estimate_gas(call),
            **chain.offered_fees(),
        }
        raw = bytes(operator.sign_transaction(transaction).raw_transaction)
        try:
            return chain.send_raw_transaction(raw)
        except UpstreamError as error:
            if "nonce" not in error.message.lower() or attempt == 2:
                raise
    raise AssertionError("unreachable")


def publish_period(
    runtime: Runtime, chain_id: int, period_id: int, until: datetime | None = None
) -> bool:
    """Build and freeze one period; whether it has claims (and this call stored it).
    `until` closes the period there instead of at its end (a trial: `trial.py`)."""
    start, end = bounds(period_id)
    end = until or end
    with runtime.storage.read() as tx:
        owed = amounts(store.snapshots(tx, chain_id, start, end), period_id, end)
    now = runtime.now()
    period = build(chain_id, period_id, owed, now, end) if owed else None
    with runtime.storage.transaction() as tx:
        stored = store.freeze(tx, chain_id, period_id, start, end, now, period)
    return stored and period is not None


def build(
    chain_id: int,
    period_id: int,
    owed: dict[str, int],
    now: datetime,
    until: datetime | None = None,
) -> YieldPeriod:
    """The artifact of a period (closed at its end, or at `until`) from each holder's
    amount (all positive)."""
    start, end = bounds(period_id)
    end = until or end
    accounts = sorted(owed)
    values = [[i, account, str(owed[account])] for i, account in enumerate(accounts)]  # JSON-safe
    tree = StandardMerkleTree.of(values, LEAF_ENCODING)
    return YieldPeriod(
        period_id=str(period_id),
        chain_id=chain_id,
        root=tree.root,
        total=str(sum(owed.values())),
        count=len(values),
        starts_at=start,
        ends_at=end,
        published_at=now,
        leaf_encoding=LEAF_ENCODING,
        leaves=[
            YieldLeaf(index=i, account=account, amount=str(owed[account]), proof=tree.proof(i))
            for i, account in enumerate(accounts)
        ],
        tree=tree.dump(),
    )
