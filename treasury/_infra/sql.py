"""SQL the domains share: list ordering, per-organization numbers, keyset pages, leases,
`IN (…)` lists in chunks."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..backends.storage.base import DuplicateKey, Params, Row, Transaction
from ..errors import Conflict
from .models import ListQuery

_SORT_COLUMNS = {"created_at": "created_at", "label": "label"}


def order_by(query: ListQuery, tiebreak: str = "id") -> str:
    """A whitelisted ORDER BY clause for `sort`/`order`, ties broken by `tiebreak`."""
    direction = "DESC" if query.order == "desc" else "ASC"
    return f"ORDER BY {_SORT_COLUMNS[query.sort]} {direction}, {tiebreak} {direction}"


#: The tables whose rows the API numbers per organization (rows never hard-deleted once shown).
NUMBERED = frozenset(
    {
        "wallets",
        "recipients",
        "bank_accounts",
        "webhooks",
        "reconciliation_breaks",
        "reconciliation_runs",
    }
)


def insert_numbered(
    tx: Transaction, table: str, org_id: str, values: dict[str, Any], returning: str | None = None
) -> Row | None:
    """Insert a row of `table` numbered in its organization: 1, 2, 3, ... each number
    given once, greater than every number given before, one tenant's numbers telling
    nothing of another's. The number comes from the organization's counter of the table
    (`numbers`). Where the transaction has sent nothing yet, the counter advances in a
    transaction of its own committed just before it (`Transaction.ahead`: PostgreSQL),
    so concurrent creates of one organization never wait on each other's commits; a
    number taken by a create that then rolls back (refused, replayed) is skipped.
    Otherwise (SQLite, or after other statements) it advances in this transaction and
    its row stays locked until the end. The row `returning` names, if any."""
    counter = (org_id, table, org_id)
    args: tuple[str, ...]
    if tx.ahead(_TAKE_AHEAD[table], counter):
        number, args = _TAKEN_AHEAD, ()
    else:
        tx.send(_TAKE[table], counter)
        number, args = _TAKEN, (org_id, table)
    return tx.one(
        _numbered_insert(table, tuple(values), number, returning),
        (org_id, *args, *values.values()),
    )


#: A table's counter of the organization advances; its first value follows the table's
#: own last number (rows written before the counters, migration 24).
_TAKE = {
    table: "INSERT INTO numbers (org_id, name, last) VALUES (?, ?,"
    f" (SELECT COALESCE(MAX(number), 0) + 1 FROM {table} WHERE org_id = ?))"
    " ON CONFLICT (org_id, name) DO UPDATE SET last = numbers.last + 1"
    for table in NUMBERED
}
_TAKEN = "(SELECT last FROM numbers WHERE org_id = ? AND name = ?)"
#: PostgreSQL's, ahead of the transaction: the number is kept in the session for the
#: INSERT that follows, and its commit waits for no flush (a create that commits
#: flushes the log past it, so no committed row holds a number a crash could give again).
_TAKE_AHEAD = {
    table: f"WITH taken AS ({take} RETURNING last) SELECT set_config('treasury.number',"
    " last::text, false), set_config('synchronous_commit', 'off', true) FROM taken"
    for table, take in _TAKE.items()
}
_TAKEN_AHEAD = "current_setting('treasury.number')::bigint"


@functools.lru_cache(maxsize=64)
def _numbered_insert(
    table: str, columns: tuple[str, ...], number: str, returning: str | None
) -> str:
    assert table in NUMBERED
    marks = ", ".join("?" * len(columns))
    sql = (
        f"INSERT INTO {table} (org_id, number, {', '.join(columns)}) VALUES (?, {number}, {marks})"
    )
    return sql if returning is None else f"{sql} RETURNING {returning}"


def insert_new(
    tx: Transaction,
    table: str,
    org_id: str,
    values: dict[str, Any],
    returning: str,
    conflict: str,
) -> Row:
    """`insert_numbered` of a row the organization may hold once (an address saved
    twice): the row `returning` names, or a 409 saying `conflict`."""
    try:
        row = insert_numbered(tx, table, org_id, values, returning)
    except DuplicateKey:
        raise Conflict(conflict) from None
    assert row is not None
    return row


#: The most values one statement's ``IN (…)`` list holds (`in_chunks`).
CHUNK = 500


def in_chunks(values: Iterable[str], size: int = CHUNK) -> Iterator[tuple[list[str], str]]:
    """The distinct `values` in ascending order, `size` at a time, each chunk with its
    placeholders (``"?, ?, ?"``) for an ``IN (…)`` list."""
    unique = sorted(set(values))
    for begin in range(0, len(unique), size):
        chunk = unique[begin : begin + size]
        yield chunk, ", ".join("?" * len(chunk))


def keyset_page(
    tx: Transaction,
    select: str,
    params: Sequence[Any],
    after: tuple[Any, Any] | None,
    limit: int,
    key: str = "id",
) -> tuple[list[Row], tuple[Any, Any] | None]:
    """One page of ``select`` (a query with a WHERE clause over a table with `created_at`
    and a unique `key` column, selected too), newest first, strictly after the position
    `after`; and the position of its last row when another page follows. The cost does
    not grow with depth: the position is a seek on an index of (…, created_at, key),
    never an OFFSET."""
    sql, args = select, list(params)
    if after is not None:
        sql += f" AND (created_at, {key}) < (?, ?)"
        args += list(after)
    rows = tx.query(sql + f" ORDER BY created_at DESC, {key} DESC LIMIT ?", (*args, limit + 1))
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], (last["created_at"], last[key])


def lease_rows(
    tx: Transaction,
    table: str,
    *,
    key: str,
    free: str,
    params: Params,
    order_by: str,
    limit: int,
    until: str,
    returning: str,
) -> list[Row]:
    """Lease up to `limit` rows of `table` that are `free` (a condition on `params`), in
    `order_by` order: their ``lease_until`` becomes `until`; `returning` of each.

    Concurrent callers never take the same row and never wait on each other's: the rows
    are picked first, skipping those another transaction holds (`Transaction.skip_locked`),
    and the UPDATE re-checks `free` on each row it locks. The pick is a CTE so it runs
    once (as a sub-select PostgreSQL may run it again per row, leasing more than
    `limit`)."""
    return tx.query(
        f"WITH picked AS (SELECT {key} FROM {table} WHERE {free}"
        f" ORDER BY {order_by} LIMIT ?{tx.skip_locked})"
        f" UPDATE {table} SET lease_until = ? WHERE {free}"
        f" AND {key} IN (SELECT {key} FROM picked) RETURNING {returning}",
        (*params, limit, until, *params),
    )


def take_expired_leases(
    tx: Transaction, table: str, key: str, where: str, now: str, until: str, limit: int
) -> list[Row]:
    """Take over up to `limit` rows of `table` matching `where` whose ``lease_until`` has
    passed: their lease moves to `until` and they are returned (`key` and ``org_id``)."""
    return lease_rows(
        tx,
        table,
        key=key,
        free=f"{where} AND lease_until <= ?",
        params=(now,),
        order_by="lease_until",
        limit=limit,
        until=until,
        returning=f"{key}, org_id",
    )
