"""The journal: every movement the service knows, posted double-entry, append-only, in the
transaction of the fact that proves it (DESIGN §3 "The books").

A *group* records one fact (a leg's settled receipt, a deposit's recorded log, a
provider's state, an admin's correction): postings ``(account, token, amount)`` in signed
raw units whose amounts sum to zero per token (`post` refuses any other). Accounts:
``wallet:<address>`` (a managed or virtual wallet of the organization: the wallets the
service holds the keys of, whose balances reconciliation compares with the chain),
``bank:<bank account id>``, ``provider:<transfer id>`` (money in flight at the fiat
provider) and ``external`` (the rest of the world, tracked wallets included). Tokens:
``USDC``, ``USDT`` and ``c0``; ETH pays gas and stays out of the books.

Rows are never updated or deleted: a correction is a new group. Each group is posted once
(`journal_groups`: its id names its fact, so a second poster of the same fact changes
nothing). Every account but ``external`` keeps a running sum (`journal_balances`) and
each of its rows the balance after it, so a balance at any time is one index seek and a
statement's opening and closing are two; an account's rows take times that never go back
(`at` is raised to its last posting's when a clock would), so the balance of the last
row before a time is the balance at that time.

A group that records a chain fact carries its block (`block_number`): reconciliation
compares the journal *at a block* (what was posted for that block or before) with the
chain's balance at that block. The writers are the domains that own the facts: the
transfers (legs, off-ramp sends, provider states), the deposit detector (deposits and
their reversals), reconciliation (corrections), and the migration that posts history.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..backends.storage.base import Transaction
from . import wallets

#: The tokens the books hold (ETH pays gas and stays out).
TOKENS = ("USDC", "USDT", "c0")
EXTERNAL = "external"
_ACCOUNT = re.compile(r"external|wallet:0x[0-9a-f]{40}|bank:[0-9a-f-]{36}|provider:[\w.:-]{1,128}")

#: What a group records (a statement entry's `kind`).
KINDS = (
    "deposit",  # a Transfer log into the wallet that none of the organization's transfers sent
    "yield_claim",  # a deposit paid by the chain's yield distributor
    "deposit_reversed",  # a deposit whose log a reorg took away
    "swap",  # an on-chain transfer settled: deposit into c0 or withdrawal from it
    "sweep",  # a virtual wallet's USDC or USDT swept into c0
    "offramp",  # an off-ramp's USDC sent to the provider
    "offramp_payout",  # the provider paid the bank account
    "onramp_funding",  # the provider received the bank's dollars
    "onramp",  # the provider paid the on-ramp's USDC out
    "refund",  # the provider paid a failed fiat transfer's money back
    "correction",  # an admin accepted a break's difference
)


class Unbalanced(ValueError):
    """A group whose postings do not sum to zero per token, or that names an account or a
    token the books do not know."""


@dataclass(frozen=True)
class Posting:
    account: str
    token: str
    amount: int  # signed raw units


def wallet(address: str) -> str:
    """The account of a wallet the organization holds."""
    return f"wallet:{address.lower()}"


def bank(external_id: str) -> str:
    return f"bank:{external_id}"


def provider(transfer_id: str) -> str:
    return f"provider:{transfer_id}"


def address_of(account: str) -> str | None:
    """The address of a ``wallet:`` account (None for any other)."""
    return account[len("wallet:") :] if account.startswith("wallet:") else None


def held(tx: Transaction, org_id: str, addresses: Iterable[str]) -> dict[str, str]:
    """Each address's account in `org_id`'s books: its wallet's when the organization
    holds its keys (a managed or virtual wallet), else ``external``."""
    unique = sorted({a.lower() for a in addresses})
    mine = wallets.held(tx, org_id, unique)
    return {a: wallet(a) if a in mine else EXTERNAL for a in unique}


def netted(postings: Iterable[Posting | tuple[str, str, int]]) -> list[Posting]:
    """The postings summed per (account, token), zeros left out, in a fixed order."""
    sums: dict[tuple[str, str], int] = defaultdict(int)
    for posting in postings:
        account, token, amount = (
            (posting.account, posting.token, posting.amount)
            if isinstance(posting, Posting)
            else posting
        )
        sums[(account, token)] += int(amount)
    return [Posting(a, t, n) for (a, t), n in sorted(sums.items()) if n]


def check(postings: Sequence[Posting]) -> None:
    """`Unbalanced` unless every token's amounts sum to zero and every account and token
    is one the books know."""
    totals: dict[str, int] = defaultdict(int)
    for posting in postings:
        if posting.token not in TOKENS:
            raise Unbalanced(f"the books hold no token {posting.token!r}")
        if not _ACCOUNT.fullmatch(posting.account):
            raise Unbalanced(f"not an account of the books: {posting.account!r}")
        totals[posting.token] += posting.amount
    unbalanced = {token: total for token, total in totals.items() if total}
    if unbalanced:
        raise Unbalanced(f"a group must sum to zero per token; it sums to {unbalanced}")


def post(
    tx: Transaction,
    *,
    org_id: str,
    group_id: str,
    at: str,
    chain_id: int,
    kind: str,
    postings: Iterable[Posting | tuple[str, str, int]],
    block_number: int | None = None,
    transfer_id: str | None = None,
    deposit_id: str | None = None,
    transaction_hash: str | None = None,
) -> bool:
    """Post one group in `tx` (the transaction of its fact): its postings netted per
    (account, token), checked (`Unbalanced`), each account's running sum moved. False
    when the group was posted before (nothing changes), or nets to nothing."""
    if kind not in KINDS:
        raise Unbalanced(f"unknown kind of group {kind!r}")
    rows = netted(postings)
    check(rows)
    if not rows:
        return False
    if not tx.execute(
        "INSERT INTO journal_groups (org_id, group_id, at) VALUES (?, ?, ?)"
        " ON CONFLICT (org_id, group_id) DO NOTHING",
        (org_id, group_id, at),
    ):
        return False
    running = sorted({(p.account, p.token) for p in rows if p.account != EXTERNAL})
    held_sums: dict[tuple[str, str], int] = {}
    for account, token in running:  # locked in one order: two posters never deadlock
        found = tx.one(
            "INSERT INTO journal_balances (org_id, account, chain_id, token, posted, last_at)"
            " VALUES (?, ?, ?, ?, '0', ?) ON CONFLICT (org_id, chain_id, account, token)"
            " DO UPDATE SET posted = journal_balances.posted RETURNING posted, last_at",
            (org_id, account, chain_id, token, at),
        )
        assert found is not None
        held_sums[(account, token)] = int(found["posted"])
        at = max(at, str(found["last_at"]))  # an account's times never go back
    for posting in rows:
        balance: int | None = None
        key = (posting.account, posting.token)
        if key in held_sums:
            balance = held_sums[key] + posting.amount
            tx.execute(
                "UPDATE journal_balances SET posted = ?, last_at = ? WHERE org_id = ?"
                " AND chain_id = ? AND account = ? AND token = ?",
                (str(balance), at, org_id, chain_id, posting.account, posting.token),
            )
        tx.execute(
            "INSERT INTO journal (org_id, group_id, at, chain_id, token, account, amount,"
            " balance, block_number, kind, transfer_id, deposit_id, transaction_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                org_id,
                group_id,
                at,
                chain_id,
                posting.token,
                posting.account,
                str(posting.amount),
                None if balance is None else str(balance),
                block_number,
                kind,
                transfer_id,
                deposit_id,
                transaction_hash,
            ),
        )
    return True


def posted(tx: Transaction, org_id: str, group_id: str) -> bool:
    """Whether a group was posted."""
    return (
        tx.one(
            "SELECT 1 AS one FROM journal_groups WHERE org_id = ? AND group_id = ?",
            (org_id, group_id),
        )
        is not None
    )


def balance(tx: Transaction, org_id: str, chain_id: int, account: str, token: str) -> int:
    """An account's posted balance now (raw; its running sum)."""
    row = tx.one(
        "SELECT posted FROM journal_balances WHERE org_id = ? AND chain_id = ? AND account = ?"
        " AND token = ?",
        (org_id, chain_id, account, token),
    )
    return 0 if row is None else int(row["posted"])


def of_transfer(tx: Transaction, transfer_id: str) -> list[dict[str, object]]:
    """The postings of a transfer's groups (its legs, its provider's states), in order."""
    return tx.query(
        "SELECT org_id, group_id, at, chain_id, token, account, amount, block_number, kind,"
        " transaction_hash FROM journal WHERE transfer_id = ? ORDER BY id",
        (transfer_id,),
    )


def symbol_of(addresses: Mapping[str, str], token: str) -> str | None:
    """The books' name of a token (``USDC``, ``USDT``, ``c0``) from its address on a chain
    whose `addresses` are given; None for a token the books do not hold."""
    lowered = token.lower()
    return next((s for s in TOKENS if addresses.get(s, "").lower() == lowered), None)


def signed_units(raw: int, decimals: int) -> str:
    """Signed raw units as a decimal string in token units (``-1.5``)."""
    from ..money import to_units

    return ("-" if raw < 0 else "") + to_units(abs(raw), decimals)
