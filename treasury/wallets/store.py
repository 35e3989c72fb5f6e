"""The wallets domain's own statements on the wallets table: a new wallet, its default
label, the organization's list, a rename and a removal. What other domains read of the
table (a wallet by address or number, every address watched) is in `_records.wallets`."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .._infra.models import ListQuery
from .._infra.sql import insert_new, order_by
from .._records.wallets import COLUMNS
from ..backends.storage.base import Row, Transaction

_CURRENT = "org_id = ? AND deleted_at IS NULL"
_DEFAULT_LABEL = re.compile(r"Wallet ([1-9][0-9]*)")


def next_default_label(labels: list[str]) -> str:
    """`Wallet N` with N the smallest positive integer no current label uses."""
    taken = {int(m.group(1)) for label in labels if (m := _DEFAULT_LABEL.fullmatch(label))}
    n = 1
    while n in taken:
        n += 1
    return f"Wallet {n}"


def default_label(tx: Transaction, org_id: str) -> str:
    """The label a new wallet gets when none is given (call under the wallets lock)."""
    rows = tx.query(
        f"SELECT label FROM wallets WHERE {_CURRENT} AND label LIKE 'Wallet %'", (org_id,)
    )
    return next_default_label([row["label"] for row in rows])


def insert(
    tx: Transaction,
    org_id: str,
    *,
    address: str,
    label: str | None,
    kind: str,
    custody_ref: str | None,
    now: str,
) -> Row:
    """A new current wallet; 409 if the organization already has that address."""
    values = {
        "address": address,
        "label": label,
        "type": kind,
        "custody_ref": custody_ref,
        "created_at": now,
        "updated_at": now,
    }
    conflict = "This organization already has a wallet with that address"
    return insert_new(tx, "wallets", org_id, values, COLUMNS, conflict)


def current(tx: Transaction, org_id: str, query: ListQuery) -> Iterator[list[Row]]:
    """The organization's current wallets in `query`'s order, in chunks."""
    return tx.stream(
        f"SELECT {COLUMNS} FROM wallets WHERE {_CURRENT} " + order_by(query, "number"),
        (org_id,),
    )


def relabel(tx: Transaction, org_id: str, address: str, label: str, now: str) -> Row | None:
    """Rename a current wallet; the row as shown, or None if there is none."""
    return tx.one(
        f"UPDATE wallets SET label = ?, updated_at = ? WHERE {_CURRENT} AND address = ?"
        f" RETURNING {COLUMNS}",
        (label, now, org_id, address),
    )


def remove(tx: Transaction, org_id: str, address: str, now: str) -> bool:
    """Take a wallet out of the organization (its row and custody key stay)."""
    return bool(
        tx.execute(
            f"UPDATE wallets SET deleted_at = ?, updated_at = ? WHERE {_CURRENT} AND address = ?",
            (now, now, org_id, address),
        )
    )
