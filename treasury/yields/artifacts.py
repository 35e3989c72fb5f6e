"""Public, immutable per-period merkle artifacts of yield distributions."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .._infra.models import ListOf
from .._infra.runtime import Runtime
from .._infra.validation import parse_value
from ..errors import NotFound
from ..evm.merkle import dumped_proofs
from . import store
from .models import PeriodId, YieldArtifact, YieldPeriod

if TYPE_CHECKING:
    from ..backends.storage.base import Row


class YieldArtifacts:
    """Published yield periods, readable by anyone, no organization involved: `list`,
    and `get` one period whole."""

    name = "yield_artifacts"

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def list(self, chain_id: int | None = None) -> ListOf[YieldArtifact]:
        """Published periods of `chain_id` (default every chain), newest first."""
        if chain_id is not None:
            chain_id = self._runtime.chains.require(chain_id)
        with self._runtime.storage.read() as tx:
            rows = store.published(tx, chain_id)
        return ListOf[YieldArtifact](
            data=[
                YieldArtifact(
                    period_id=str(row["period_id"]),
                    chain_id=row["chain_id"],
                    root=row["root"],
                    total=row["total"],
                    count=row["count"],
                    starts_at=row["starts_at"],
                    ends_at=row["ends_at"],
                    published_at=row["published_at"],
                )
                for row in rows
            ]
        )

    def get(self, period_id: str | int, chain_id: int | None = None) -> YieldPeriod:
        """One published period on `chain_id` (default the primary chain): its leaves
        with their proofs and the tree's dump (frozen: the same body on every call).
        404 when it is not published."""
        number = int(parse_value(PeriodId, str(period_id), "query", "periodId"))
        chains = self._runtime.chains
        chain = chains.primary if chain_id is None else chains.require(chain_id)
        with self._runtime.storage.read() as tx:
            row = store.artifact(tx, chain, number)
        if row is None:
            raise NotFound(f"Period {number} is not published on chain {chain}")
        return stored_period(row)


def stored_period(row: Row) -> YieldPeriod:
    """The API's `YieldPeriod` from a published period's row (`store.artifact`): its
    leaves and their proofs read from its stored tree (validated as one document: as
    fast as parsing the whole body was). A period published before the tree was stored
    alone holds the API's whole body there: its ``tree`` is read."""
    stored = json.loads(row["artifact"])
    tree = stored["tree"] if "leaves" in stored else stored
    leaves = [
        {"index": index, "account": account, "amount": amount, "proof": proof}
        for (index, account, amount), proof in zip(
            (entry["value"] for entry in tree["values"]), dumped_proofs(tree), strict=True
        )
    ]
    return YieldPeriod.model_validate(
        {
            "period_id": str(row["period_id"]),
            "chain_id": row["chain_id"],
            "root": row["root"],
            "total": row["total"],
            "count": row["count"],
            "starts_at": row["starts_at"],
            "ends_at": row["ends_at"],
            "published_at": row["published_at"],
            "leaf_encoding": tree["leafEncoding"],
            "leaves": leaves,
            "tree": tree,
        }
    )
