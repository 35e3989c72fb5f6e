"""Small SQL helpers shared by the operation modules."""

from __future__ import annotations

from ..models.common import ListQuery

_SORT_COLUMNS = {"created_at": "created_at", "label": "label"}


def order_by(query: ListQuery) -> str:
    """A whitelisted ORDER BY clause for `sort`/`order`, ties broken by id."""
    direction = "DESC" if query.order == "desc" else "ASC"
    return f"ORDER BY {_SORT_COLUMNS[query.sort]} {direction}, id {direction}"
