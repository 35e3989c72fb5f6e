"""What each fact the service knows posts to the journal (`journal.post`), called by the
domain that owns the fact, in the transaction that records it. Each group is named by its
fact, so posting it twice changes nothing.

=================  ==============================================================  ===========
fact               postings (raw units)                                            block
=================  ==============================================================  ===========
on-chain transfer  from: -in of token_in, external: +in; external: -out of         its receipt
settled            token_out, to: +out (deposit USDC→c0, withdrawal c0→USDC,
(``transfer:``)    sweep); what ties out with ``balanceOf``: the facility takes
                   token_in from the sender and pays token_out to the recipient
off-ramp send      wallet: -amount USDC, provider:<id>: +amount                    its receipt
(``send:``)
off-ramp paid      provider:<id>: -amount, bank:<id>: +paid, external: +fee        —
(``payout:``)
on-ramp funded     bank:<id>: -amount, provider:<id>: +amount                      —
(``funding:``)
on-ramp paid out   provider:<id>: -amount, to: +paid, external: +fee               the payout's
(``payout:``)                                                                      receipt
refunded           provider:<id>: -held; on-ramp: bank:<id>: +held (the dollars     —
(``refund:``)      back to the bank), off-ramp: external: +held (the USDC back to
                   its sender, a deposit when it lands in a wallet)
deposit recorded   external: -raw, wallet: +raw (a yield claim when the yield      its log
(``deposit:``)     distributor paid it; the faucet's mint is a deposit too)
deposit reversed   wallet: -raw, external: +raw                                    its log's
(``reversal:``)                                                                    (gone)
=================  ==============================================================  ===========

``from``/``to``: the account of the address in the organization's books (its wallet's,
for a managed or virtual wallet; else ``external``). The fiat amounts count 1:1 in USDC
(the provider's dollars are the chain's USDC), in USDC's raw units.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .._infra.runtime import Runtime
from ..backends.storage.base import Row, Transaction
from ..money import to_raw
from . import journal, marks

#: The provider states in which the provider holds a fiat transfer's money (an on-ramp's
#: dollars, an off-ramp's USDC): received and not paid on, or failed after it arrived and
#: not refunded yet (a refund under way, or one that failed).
HOLDING = frozenset(
    {
        "funds_received",
        "payment_submitted",
        "returned",
        "undeliverable",
        "refund_in_flight",
        "refund_failed",
    }
)
#: The provider states that do not tell where the money is (a review, a missing return
#: policy, an error): the books wait for the next.
UNTOLD = frozenset({"in_review", "missing_return_policy", "error"})
#: The failed states from which the provider still pays the money back (``refunded``):
#: the fiat job keeps reading a failed transfer in one of them.
REFUNDING = frozenset({"returned", "undeliverable", "refund_in_flight"})
REFUNDED = "refunded"
#: The provider states in which an on-ramp's dollars reached the provider (at some time).
FUNDED = HOLDING | {"payment_processed", REFUNDED}
#: The provider states after an off-ramp's USDC arrived at the provider.
RECEIVED = HOLDING | {"payment_processed", REFUNDED}
_SYMBOLS = {"usdc": "USDC", "usdt": "USDT", "c0": "c0", "usd": "USDC"}


def _side(row: Row, name: str) -> dict[str, Any]:
    side: dict[str, Any] = json.loads(row[name])
    return side


def _raw(runtime: Runtime, chain_id: int, token: str, amount: str) -> int:
    return to_raw(amount, runtime.chains.decimals(chain_id, token)) if amount != "0" else 0


def swap_settled(
    tx: Transaction,
    runtime: Runtime,
    row: Row,
    block_number: int | None,
    tx_hash: str | None,
    at: str | None = None,
) -> bool:
    """An on-chain transfer (deposit, withdrawal, sweep) completed by its receipt (`at`:
    when, default now)."""
    chain_id, org_id = int(row["chain_id"]), str(row["org_id"])
    source, destination = _side(row, "source"), _side(row, "destination")
    token_in, token_out = _SYMBOLS[source["currency"]], _SYMBOLS[destination["currency"]]
    raw_in = _raw(runtime, chain_id, token_in, source["amount"])
    raw_out = _raw(runtime, chain_id, token_out, destination["amount"])
    accounts = journal.held(tx, org_id, [row["wallet_address"], destination["address"]])
    return journal.post(
        tx,
        org_id=org_id,
        group_id=f"transfer:{row['id']}",
        at=at or runtime.now_text(),
        chain_id=chain_id,
        kind="sweep" if row["pairing"] == "sweep" else "swap",
        postings=[
            (accounts[str(row["wallet_address"]).lower()], token_in, -raw_in),
            (journal.EXTERNAL, token_in, raw_in),
            (journal.EXTERNAL, token_out, -raw_out),
            (accounts[str(destination["address"]).lower()], token_out, raw_out),
        ],
        block_number=block_number,
        transfer_id=str(row["id"]),
        transaction_hash=tx_hash,
    )


def offramp_sent(
    tx: Transaction,
    runtime: Runtime,
    row: Row,
    block_number: int | None,
    tx_hash: str | None,
    at: str | None = None,
) -> bool:
    """An off-ramp's USDC arrived at the provider's deposit address (its receipt
    settled, or the provider says so: `block_number` from its mark or receipt)."""
    chain_id, org_id = int(row["chain_id"]), str(row["org_id"])
    raw = _raw(runtime, chain_id, "USDC", str(row["amount"]))
    accounts = journal.held(tx, org_id, [row["wallet_address"]])
    return journal.post(
        tx,
        org_id=org_id,
        group_id=f"send:{row['id']}",
        at=at or runtime.now_text(),
        chain_id=chain_id,
        kind="offramp",
        postings=[
            (accounts[str(row["wallet_address"]).lower()], "USDC", -raw),
            (journal.provider(str(row["id"])), "USDC", raw),
        ],
        block_number=block_number,
        transfer_id=str(row["id"]),
        transaction_hash=tx_hash,
    )


def provider_state(
    tx: Transaction,
    runtime: Runtime,
    row: Row,
    state: str,
    completed: bool,
    *,
    at: str | None = None,
    block_of: Callable[[str | None], int | None] | None = None,
) -> None:
    """A recorded fiat transfer's provider state (`row` as it is now, after the guarded
    update): an on-ramp's dollars at the provider, its USDC paid out on completion; an
    off-ramp's USDC received (when its send was not posted yet), its dollars paid to the
    bank on completion. `block_of(hash)`: the block a transaction was mined in (default:
    its mark, else its receipt from the chain)."""
    chain_id, org_id, transfer_id = int(row["chain_id"]), str(row["org_id"]), str(row["id"])
    amount = _raw(runtime, chain_id, "USDC", str(row["amount"]))
    paid = _raw(runtime, chain_id, "USDC", str(_side(row, "destination")["amount"]))
    held_at = journal.provider(transfer_id)
    bank = journal.bank(str(row["bank_account_id"]))
    common: dict[str, Any] = {
        "org_id": org_id,
        "at": at or runtime.now_text(),
        "chain_id": chain_id,
        "transfer_id": transfer_id,
    }

    def block(tx_hash: str | None) -> int | None:
        if block_of is not None:
            return block_of(tx_hash)
        found = marks.of(tx, chain_id, "leg", transfer_id)
        return found.block_number if found else _block(runtime, chain_id, tx_hash)

    if row["pairing"] == "onramp":
        if state in FUNDED or completed:
            journal.post(
                tx,
                **common,
                group_id=f"funding:{transfer_id}",
                kind="onramp_funding",
                postings=[(bank, "USDC", -amount), (held_at, "USDC", amount)],
            )
        if completed and not journal.posted(tx, org_id, f"payout:{transfer_id}"):
            to = str(_side(row, "destination")["address"]).lower()
            account = journal.held(tx, org_id, [to])[to]
            payout = row["transaction_hash"]
            journal.post(
                tx,
                **common,
                group_id=f"payout:{transfer_id}",
                kind="onramp",
                postings=[
                    (held_at, "USDC", -amount),
                    (account, "USDC", paid),
                    (journal.EXTERNAL, "USDC", amount - paid),
                ],
                block_number=block(payout) if account != journal.EXTERNAL else None,
                transaction_hash=payout,
            )
        if state == REFUNDED:
            _refund(tx, common, held_at, bank)
        return
    sent = row["transaction_hash"]
    arrived = (state in RECEIVED or completed) and sent is not None
    if arrived and not journal.posted(tx, org_id, f"send:{transfer_id}"):
        offramp_sent(tx, runtime, row, block(sent), sent, at=common["at"])
    if completed:
        journal.post(
            tx,
            **common,
            group_id=f"payout:{transfer_id}",
            kind="offramp_payout",
            postings=[
                (held_at, "USDC", -amount),
                (bank, "USDC", paid),
                (journal.EXTERNAL, "USDC", amount - paid),
            ],
        )
    if state == REFUNDED:
        _refund(tx, common, held_at, journal.EXTERNAL)


def _refund(tx: Transaction, common: dict[str, Any], held_at: str, to: str) -> None:
    """The provider paid a failed transfer's money back: whatever the books hold at the
    provider for it leaves there, to `to` (the bank account, or ``external``)."""
    held = journal.balance(tx, common["org_id"], common["chain_id"], held_at, "USDC")
    journal.post(
        tx,
        **common,
        group_id=f"refund:{common['transfer_id']}",
        kind="refund",
        postings=[(held_at, "USDC", -held), (to, "USDC", held)],
    )


def _block(runtime: Runtime, chain_id: int, tx_hash: str | None) -> int | None:
    """The block a transaction was mined in (None when it is not, or no hash)."""
    if tx_hash is None:
        return None
    (receipt,) = runtime.chains.get(chain_id).receipts([tx_hash])
    return None if receipt is None else receipt.block_number


def deposit(
    tx: Transaction,
    *,
    fields: Mapping[str, Any],
    token: str,
    kind: str,
    now: str,
    reversed_: bool = False,
) -> bool:
    """A deposit recorded (or, `reversed_`, taken away by a reorg) for an organization:
    `fields` as the detector stores it (chain_id, tx_hash, log_index, org_id, address,
    raw, block_number); `token` its symbol in the books. Every recording and reversal of
    the same log is a group of its own (a log may go and come back)."""
    org_id, chain_id = str(fields["org_id"]), int(fields["chain_id"])
    deposit_id = f"{chain_id}:{fields['tx_hash']}:{fields['log_index']}"
    address = str(fields["address"]).lower()
    account = journal.held(tx, org_id, [address])[address]
    if account == journal.EXTERNAL or token not in journal.TOKENS:
        return False  # a tracked wallet's: not in the books
    raw = int(fields["raw"])
    posted, taken = (
        _groups(tx, org_id, f"{name}:{deposit_id}") for name in ("deposit", "reversal")
    )
    if posted - taken != (1 if reversed_ else 0):
        return False  # it is not in the books (or is already): nothing to post
    name, count = ("reversal", taken) if reversed_ else ("deposit", posted)
    sign = -1 if reversed_ else 1
    return journal.post(
        tx,
        org_id=org_id,
        group_id=f"{name}:{deposit_id}" + (f"#{count + 1}" if count else ""),
        at=now,
        chain_id=chain_id,
        kind="deposit_reversed" if reversed_ else kind,
        postings=[(account, token, sign * raw), (journal.EXTERNAL, token, -sign * raw)],
        block_number=int(fields["block_number"]),
        deposit_id=deposit_id,
        transaction_hash=str(fields["tx_hash"]),
    )


def _groups(tx: Transaction, org_id: str, prefix: str) -> int:
    """How many groups of the organization are named `prefix` or `prefix#n`."""
    row = tx.one(
        "SELECT COUNT(*) AS n FROM journal_groups WHERE org_id = ? AND (group_id = ?"
        " OR group_id LIKE ?)",
        (org_id, prefix, prefix + "#%"),
    )
    return 0 if row is None else int(row["n"])
