"""`org.audit_events`: the organization's audit log, newest first, a page at a time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._infra.audit import event_of, seal_pending
from .._infra.group import Group
from .._infra.models import Page, PageQuery
from .._infra.pagination import Cursors, page_of
from .._infra.validation import parse_input
from ..backends.storage.base import Row, Transaction
from .models import AuditEvent

_COLUMNS = (
    "seq, id, at, actor, operation, object_type, object_id, status, request_id, prev_hash, hash"
)


class AuditEvents(Group):
    name = "audit_events"

    def list(
        self, query: PageQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> Page[AuditEvent]:
        """The events, newest first; pass `next_cursor` back as `cursor` for the next page."""
        query = parse_input(PageQuery, query, params, "query")
        org_id = self._scope.org_id
        runtime = self._scope.runtime
        cursors = Cursors(runtime.secrets.derive("cursor:audit"), "audit-events")
        seal_pending(runtime, org_id)  # its pending events first
        with runtime.storage.read() as tx:
            rows, following = page_of(
                cursors, org_id, query, lambda after, n: _page(tx, org_id, after, n)
            )
        events = [AuditEvent.model_validate(event_of(row)) for row in rows]
        return Page[AuditEvent](data=events, next_cursor=following)


def _page(
    tx: Transaction, org_id: str, after: tuple[Any, Any] | None, limit: int
) -> tuple[list[Row], tuple[Any, Any] | None]:
    """Newest first by the chain's sequence number, a seek on the primary key."""
    sql = f"SELECT {_COLUMNS} FROM audit_events WHERE org_id = ?"
    args: list[Any] = [org_id]
    if after is not None:
        sql += " AND seq < ?"
        args.append(int(after[0]))
    rows = tx.query(sql + " ORDER BY seq DESC LIMIT ?", (*args, limit + 1))
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], (last["seq"], last["id"])
