"""The reorg check job: one batched request per chain per pass.

Per chain with marks (a chain the service did nothing on lately costs no request): the
head, then the canonical blocks at every height a mark within `REACH` of the head stands
on, in one request (`Chain.blocks`). A mark whose hash differs from the
canonical block's at its height, or that stands above the head, is flagged orphaned; its
owner acts on it in the same pass (the job runs before the transfers' and the deposits'
jobs). Marks that fall out of reach are forgotten. The cost grows with the marks within
reach (what the service did in the newest blocks), never with the chain's length or the
store's.
"""

from __future__ import annotations

from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import marks


def check_blocks(runtime: Runtime, report: Report) -> None:
    """Job: flag the marks whose block left the canonical chain, on every chain."""
    for chain_id in runtime.chains.ids():
        with report.part(f"chain {chain_id}"):
            report.add(check_chain(runtime, chain_id))


def check_chain(runtime: Runtime, chain_id: int) -> dict[str, int]:
    """Compare the marks within reach with the canonical chain; the counts."""
    with runtime.storage.read() as tx:
        kept = marks.within(tx, chain_id, 0)  # those out of reach were forgotten
    if not kept:
        return {}  # nothing acted on here lately: no request at all
    chain = runtime.chains.get(chain_id)
    head = chain.head()
    lowest = max(head - marks.REACH, 0)
    kept = [mark for mark in kept if mark.block_number >= lowest]
    numbers = sorted({mark.block_number for mark in kept if mark.block_number <= head})
    found = zip(numbers, chain.blocks(numbers), strict=True)
    canonical = {number: block.hash for number, block in found if block is not None}
    gone = [mark for mark in kept if canonical.get(mark.block_number) != mark.block_hash]
    with runtime.storage.transaction() as tx:
        if gone:
            marks.orphan(tx, chain_id, gone)
        forgotten = marks.forget_below(tx, chain_id, lowest)
    return {
        "blocks_checked": len(numbers),
        "marks_orphaned": len(gone),
        "marks_forgotten": forgotten,
    }
