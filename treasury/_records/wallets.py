"""The look-ups other domains make on the wallets table (one row per wallet, managed or
tracked, numbered per organization) and over every wallet the service knows, virtual
ones included.

The wallets domain writes and lists them (`treasury.wallets.store`); transfers sign
from and track into them, the deposit detector watches their addresses, the yields
snapshot reads their balances and the books hold an account for those whose keys an
organization holds.
The virtual wallets table belongs to the virtual domain, which provisions one per
organization; it is read here (`watched`, `every_address`, `custody_ref`, `virtual`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from .._infra.sql import in_chunks
from ..backends.storage.base import Row, Transaction

COLUMNS = "number AS id, address, label, type, created_at, updated_at"
_CURRENT = "org_id = ? AND deleted_at IS NULL"


def by_address(tx: Transaction, org_id: str, address: str) -> Row | None:
    """A current wallet with its internal `row_id` and `custody_ref` (None if tracked)."""
    return tx.one(
        f"SELECT {COLUMNS}, custody_ref, id AS row_id FROM wallets"
        f" WHERE {_CURRENT} AND address = ?",
        (org_id, address),
    )


def by_number(tx: Transaction, org_id: str, number: int) -> Row | None:
    return tx.one(
        f"SELECT {COLUMNS}, id AS row_id FROM wallets WHERE {_CURRENT} AND number = ?",
        (org_id, number),
    )


# -- every wallet the service knows, virtual ones included -------------------------------


_WATCHED = (
    "SELECT address, org_id FROM wallets WHERE deleted_at IS NULL{where}"
    " UNION ALL SELECT address, org_id FROM virtual_wallets{also}"
)


def watched_count(tx: Transaction) -> int:
    """How many (address, organization) pairs are watched: managed, tracked and virtual
    wallets."""
    row = tx.one(f"SELECT COUNT(*) AS n FROM ({_WATCHED.format(where='', also='')}) AS w")
    return 0 if row is None else int(row["n"])


def watched(tx: Transaction, addresses: Sequence[str] | None = None) -> dict[str, list[str]]:
    """The organizations watching each address: of every managed, tracked and virtual
    wallet, or of those among `addresses` (looked up by address, 500 at a time)."""
    found: dict[str, list[str]] = defaultdict(list)
    statements: list[tuple[str, tuple[str, ...]]]
    if addresses is None:
        statements = [(_WATCHED.format(where="", also=""), ())]
    else:
        statements = [
            (
                _WATCHED.format(
                    where=f" AND address IN ({marks})", also=f" WHERE address IN ({marks})"
                ),
                (*batch, *batch),
            )
            for batch, marks in in_chunks(addresses)
        ]
    for sql, params in statements:
        for row in tx.query(sql, params):
            found[row["address"]].append(row["org_id"])
    return dict(found)


def every_address(tx: Transaction) -> list[str]:
    """Every address the service knows: managed, tracked and virtual wallets of every
    organization, in ascending order."""
    rows = tx.query(
        "SELECT address FROM wallets WHERE deleted_at IS NULL"
        " UNION SELECT address FROM virtual_wallets ORDER BY address"
    )
    return [row["address"] for row in rows]


def custody_ref(tx: Transaction, address: str) -> str | None:
    """The custody key of a managed or virtual wallet, by its address."""
    row = tx.one(
        "SELECT custody_ref FROM wallets WHERE address = ? AND custody_ref IS NOT NULL"
        " UNION SELECT custody_ref FROM virtual_wallets WHERE address = ? LIMIT 1",
        (address, address),
    )
    return None if row is None else str(row["custody_ref"])


def managed_by_address(tx: Transaction, address: str) -> Row | None:
    """The live managed wallet at `address` (`org_id`, `id`, `custody_ref`), whichever
    organization holds it."""
    return tx.one(
        "SELECT org_id, number AS id, custody_ref FROM wallets WHERE address = ?"
        " AND custody_ref IS NOT NULL AND deleted_at IS NULL LIMIT 1",
        (address,),
    )


def virtual(tx: Transaction) -> list[Row]:
    """Every organization's virtual wallet (`org_id`, `address`, `custody_ref`), oldest first."""
    return tx.query("SELECT org_id, address, custody_ref FROM virtual_wallets ORDER BY id")


# -- the wallets whose keys an organization holds (the books' wallet accounts) -------------


def held(tx: Transaction, org_id: str, addresses: Sequence[str]) -> set[str]:
    """Of `addresses` (lowercase), those of a current managed wallet or the virtual wallet
    of `org_id`: the wallets its books hold an account for."""
    found: set[str] = set()
    for batch, marks in in_chunks(addresses):
        rows = tx.query(
            f"SELECT address FROM wallets WHERE {_CURRENT} AND custody_ref IS NOT NULL"
            f" AND address IN ({marks}) UNION SELECT address FROM virtual_wallets"
            f" WHERE org_id = ? AND address IN ({marks})",
            (org_id, *batch, org_id, *batch),
        )
        found |= {str(row["address"]) for row in rows}
    return found


def held_by_organization(tx: Transaction, org_id: str | None = None) -> dict[str, list[str]]:
    """The managed and virtual wallets of every organization (or of `org_id`), by
    organization, each list in ascending order: the wallets reconciliation compares."""
    where, params = ("", ()) if org_id is None else (" AND org_id = ?", (org_id,))
    also = "" if org_id is None else " WHERE org_id = ?"
    rows = tx.query(
        "SELECT org_id, address FROM wallets WHERE deleted_at IS NULL"
        f" AND custody_ref IS NOT NULL{where}"
        f" UNION SELECT org_id, address FROM virtual_wallets{also} ORDER BY org_id, address",
        (*params, *params),
    )
    found: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        found[str(row["org_id"])].append(str(row["address"]))
    return dict(found)
