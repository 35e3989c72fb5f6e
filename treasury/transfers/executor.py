"""A pairing's executor: its upstream steps, typed by what its perform step gives its
record step (`S`: the provider's answer, the outcome of a broadcast).

Every record step opens the same way, written once here (`executor`): the transfer is
read again in the recording transaction; gone, it was abandoned meanwhile (an upstream
error); still ``claimed``, the pairing records `S` on it; already recorded (another
finisher was first), nothing is written. Either way the Transfer is shown as it is now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .._infra.idempotency import Upstream
from .._infra.runtime import Runtime
from .._records.transfers import CLAIMED
from ..backends.storage.base import Row, Transaction
from ..errors import UpstreamError
from . import store
from .models import Transfer

S = TypeVar("S")

#: A pairing's record step: the claim's row (still ``claimed``) and what perform gave.
Record = Callable[[Transaction, Row, S], None]


def executor(
    runtime: Runtime,
    perform: Callable[[str], S],
    record: Record[S],
    abandon: Callable[[Transaction, str], None] | None = None,
) -> Upstream[S, Transfer]:
    """The steps of a pairing: `perform`, then `record` under the common opening;
    ambiguity is sticky (`store.keep`); `abandon` by default forgets the claim
    (`store.remove`)."""

    def remove(tx: Transaction, transfer_id: str) -> None:
        store.remove(tx, transfer_id, runtime.now_text(), runtime.secrets)

    def record_claim(tx: Transaction, transfer_id: str, result: S) -> Transfer:
        row = store.get(tx, transfer_id)
        if row is None:
            raise UpstreamError("the transfer was abandoned meanwhile")
        if row["stage"] == CLAIMED:
            record(tx, row, result)
            row = store.get(tx, transfer_id) or row
        return store.shown(row, runtime.secrets)

    return Upstream(
        perform=perform, record=record_claim, abandon=abandon or remove, keep=store.keep
    )
