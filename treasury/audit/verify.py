"""The check of every organization's chain (`treasury audit verify`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .._infra.audit import GENESIS, event_of, hash_of
from ..backends.storage.base import Row, Storage

_COLUMNS = "org_id, seq, id, at, actor, operation, object_type, object_id, status, request_id"


@dataclass(frozen=True)
class BrokenLink:
    """The first place a chain does not hold: the organization, the event (its id and
    sequence number; None when the chain's end is missing) and what is wrong."""

    org_id: str
    seq: int
    event_id: str | None
    problem: str

    def __str__(self) -> str:
        where = f"event {self.event_id} (#{self.seq})" if self.event_id else f"#{self.seq}"
        return f"organization {self.org_id}: {where}: {self.problem}"


def verify_chains(storage: Storage, key: bytes) -> tuple[int, BrokenLink | None]:
    """Walk every organization's chain in order: the number of events checked, and the
    first broken link (None when every chain holds). `key`: the audit key (`audit_key`).
    An event is broken when its hash is not the keyed hash of its content (altered, or
    re-hashed by someone without the master key), its `prev_hash` is not its predecessor's hash
    (deleted or reordered before it) or its number does not follow; a chain is broken at
    its end when its head names a later event (the last ones deleted)."""
    checked = 0
    with storage.read() as tx:
        heads = {
            row["org_id"]: row
            for row in tx.query("SELECT org_id, seq, hash FROM audit_heads ORDER BY org_id")
        }
        orgs = sorted(set(heads) | {row["org_id"] for row in tx.query(_ORGS)})
        for org_id in orgs:
            rows = tx.stream(
                f"SELECT {_COLUMNS}, prev_hash, hash FROM audit_events WHERE org_id = ?"
                " ORDER BY seq",
                (org_id,),
                500,
            )
            seq, last = 0, GENESIS
            for row in _each(rows):
                checked += 1
                broken = _link(row, seq + 1, last, key)
                if broken is not None:
                    return checked, BrokenLink(org_id, row["seq"], row["id"], broken)
                seq, last = row["seq"], row["hash"]
            head = heads.get(org_id)
            if head is None or (head["seq"], head["hash"]) != (seq, last):
                shown = "none" if head is None else f"#{head['seq']}"
                problem = f"the chain ends at #{seq} but its head is {shown}: events missing"
                return checked, BrokenLink(org_id, seq + 1, None, problem)
    return checked, None


_ORGS = "SELECT DISTINCT org_id FROM audit_events"


def _each(chunks: Iterator[list[Row]]) -> Iterator[Row]:
    for chunk in chunks:
        yield from chunk


def _link(row: Row, seq: int, previous: str, key: bytes) -> str | None:
    """What is wrong with one event given the number and hash it must follow, or None."""
    if row["seq"] != seq:
        return f"expected event #{seq} here: events missing or reordered"
    if row["prev_hash"] != previous:
        return "its previous hash is not the hash of the event before it (deleted or reordered)"
    if hash_of(event_of(row), key) != row["hash"]:
        return "its hash is not the keyed hash of its content (altered or re-hashed)"
    return None
