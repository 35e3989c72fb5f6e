"""The fiat executors: the bank on-ramp and the wallet off-ramp, through the provider.

Both claim the transfer row first, then call the provider with the transfer's id as its
idempotency key (a repeat returns the same provider transfer). The off-ramp then sends
the wallet's USDC to the provider's deposit address for that transfer, written ahead
like every on-chain leg. The provider's progress is read by `advance` (a job), which
maps its states to ours (DESIGN §3) through the one guarded update.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal

from .._infra.idempotency import Upstream
from .._infra.models import ZERO_ADDRESS
from .._infra.runtime import Runtime
from .._records import bank_accounts, customers, nonces, postings, wallets
from .._records import transactions as tracked
from .._records.transactions import RecordTransaction
from .._records.transfers import CLAIMED, RECORDED, Status
from ..backends.fiat.base import FAILED_STATES, OffRamp, OnRamp, ProviderTransfer
from ..backends.storage.base import Row, Transaction
from ..errors import UpstreamError
from ..evm.abi import TRANSFER
from ..evm.signing import broadcast
from ..money import Amount
from . import store
from .executor import executor
from .models import DepositInstructions, Transfer
from .onchain import APPROVE_GAS, Replaced, evidence, raw_amount, record_sent

#: The provider's transfer states, as our statuses (DESIGN §3 "Provider states map"): its
#: exception paths fail the transfer; a review or a missing return policy keeps it pending.
STATUS_OF_STATE: dict[str, Status] = {
    "awaiting_funds": "pending",
    "in_review": "pending",
    "funds_received": "pending",
    "missing_return_policy": "pending",
    "payment_submitted": "submitted",
    "payment_processed": "completed",
    **dict.fromkeys(FAILED_STATES, "failed"),
}


def failure_reason(state: str) -> str:
    """The `failureReason` of a transfer the provider failed: its state, named."""
    return f"the fiat provider's transfer state is {state}"


def _request(tx: Transaction, row: Row) -> OnRamp | OffRamp:
    bank = bank_accounts.provider_account(tx, row["org_id"], row["bank_account_id"])
    if bank is None or bank["provider_account_id"] is None:
        raise UpstreamError("the transfer's bank account is no longer registered")
    fields = {
        "amount": row["amount"],
        "developer_fee": row["developer_fee"],
        "external_account_id": bank["provider_account_id"],
        "chain_id": row["chain_id"],
    }
    if row["pairing"] == "onramp":
        destination = store.Side.loads(row["destination"])
        return OnRamp(**fields, to_address=str(destination.address))
    return OffRamp(**fields, from_address=row["wallet_address"])


def _ask_provider(runtime: Runtime, tx: Transaction, row: Row) -> Callable[[], ProviderTransfer]:
    """Read what the provider needs to create `row`'s transfer in `tx`; the call itself,
    to make after `tx` ends (with the transfer id as the provider's idempotency key)."""
    request, org = _request(tx, row), customers.organization(tx, row["org_id"])

    def ask() -> ProviderTransfer:
        customer = customers.provider_customer(runtime, row["org_id"], org)
        return runtime.fiat.create_transfer(customer, request, idempotency_key=row["id"])

    return ask


def onramp_steps(runtime: Runtime) -> Upstream[ProviderTransfer | None, Transfer]:
    def perform(transfer_id: str) -> ProviderTransfer | None:
        with runtime.storage.read() as tx:  # one read for the row and the request
            row = store.get(tx, transfer_id)
            if row is None or row["stage"] != CLAIMED:
                return None
            ask = _ask_provider(runtime, tx, row)
        return ask()

    def record(tx: Transaction, row: Row, answer: ProviderTransfer | None) -> None:
        if answer is None:
            return
        store.update(
            tx,
            row["id"],
            runtime.now_text(),
            box=runtime.secrets,
            stage=RECORDED,
            provider_transfer_id=answer.id,
            provider_state=answer.state,  # announced as it is: `apply` changes nothing more
            deposit_instructions=_instructions(runtime, row, answer),
        )
        apply(tx, runtime, store.get(tx, row["id"]) or row, answer)

    return executor(runtime, perform, record)


def offramp_steps(runtime: Runtime) -> Upstream[Replaced | None, Transfer]:
    def perform(transfer_id: str) -> Replaced | None:
        with runtime.storage.read() as tx:
            row = store.get(tx, transfer_id)
            if row is None or row["stage"] != CLAIMED:
                return None
            unasked = row["provider_transfer_id"] is None
            ask = _ask_provider(runtime, tx, row) if unasked else None
        if ask is not None:
            answer = ask()
            with runtime.storage.transaction() as tx:
                store.update(
                    tx,
                    transfer_id,
                    runtime.now_text(),
                    box=runtime.secrets,
                    provider_transfer_id=answer.id,
                    provider_state=answer.state,
                    deposit_address=answer.deposit_address,
                )
                row = store.get(tx, transfer_id) or row
        if row["deposit_address"] is None:  # nowhere to send the USDC: it cannot proceed
            raise UpstreamError("the fiat provider gave no deposit address for the off-ramp")
        return _send_usdc(runtime, row)

    def record(tx: Transaction, row: Row, replaced: Replaced | None) -> None:
        record_sent(runtime, tx, row, replaced, None)  # a replaced send: the job cancels

    def abandon(tx: Transaction, transfer_id: str) -> None:
        row, now = store.get(tx, transfer_id), runtime.now_text()
        if row is not None and row["provider_transfer_id"] is not None:  # the provider knows it
            store.fail_claim(tx, transfer_id, now, runtime.secrets, "not sent")
            store.forget_unsent(tx, transfer_id)
        else:
            store.remove(tx, transfer_id, now, runtime.secrets)

    return executor(runtime, perform, record, abandon)


def _send_usdc(runtime: Runtime, row: Row) -> Replaced | None:
    """Sign (once) and broadcast the wallet's USDC to the provider's deposit address;
    after an ambiguous attempt, the chain's evidence first (`Replaced` if it never can
    be mined)."""
    chain_id, wallet = int(row["chain_id"]), str(row["wallet_address"])
    chain = runtime.chains.get(chain_id)
    with runtime.signer.holding(chain_id, wallet):
        with runtime.storage.read() as tx:
            legs = store.legs(tx, row["id"])
            found = wallets.by_address(tx, row["org_id"], wallet)
            doubted = bool(row["ambiguous"])  # the row perform read (and updated) just now
        if legs and doubted:
            seen = evidence(chain, wallet, legs[-1])
            if seen is not None:
                return Replaced() if seen == "replaced" else None
        if not legs:
            if found is None or found["custody_ref"] is None:
                raise UpstreamError("the off-ramp's wallet can no longer sign")
            custody_ref = str(found["custody_ref"])

            def sign_and_store() -> list[store.Leg]:
                with runtime.storage.read() as tx:
                    floor = nonces.next_free_nonce(tx, chain_id, wallet)
                usdc = chain.addresses["USDC"]
                raw = raw_amount(runtime, chain_id, Amount.of(row["amount"], "USDC"))
                signed = runtime.signer.sign(
                    chain,
                    custody_ref=custody_ref,
                    nonce=max(chain.pending_nonce(wallet), floor),
                    to=usdc,
                    data=TRANSFER.encode(row["deposit_address"], raw),
                    gas=APPROVE_GAS,
                    fees=chain.offered_fees(),
                )
                with runtime.storage.transaction() as tx:
                    store.add_legs(
                        tx,
                        row["id"],
                        chain_id,
                        wallet,
                        [store.Leg("other", usdc, usdc, raw, signed)],
                    )
                    return store.legs(tx, row["id"])

            legs = nonces.apart(sign_and_store)
        broadcast(chain, [leg.signed for leg in legs])
    return None


def _instructions(runtime: Runtime, row: Row, answer: ProviderTransfer) -> str | None:
    """The on-ramp's deposit instructions as stored: sealed (they hold account numbers)."""
    deposit = answer.bank_deposit
    if deposit is None:
        return None
    instructions = DepositInstructions.of(deposit, row["amount"])
    return runtime.secrets.seal(store.INSTRUCTIONS, instructions.model_dump_json())


def apply(tx: Transaction, runtime: Runtime, row: Row, answer: ProviderTransfer) -> str | None:
    """Bring a recorded fiat transfer to what the provider says; its new status if it
    moved (an on-ramp's payout hash and the final amount come along)."""
    now, fields = runtime.now_text(), {"provider_state": answer.state}
    if row["pairing"] == "onramp" and answer.destination_tx_hash:
        fields["transaction_hash"] = answer.destination_tx_hash
    if answer.final_amount is not None:
        destination = store.Side.loads(row["destination"])
        paid = format(Decimal(answer.final_amount).normalize(), "f")
        fields["destination"] = replace(destination, amount=paid).dumps()
    paying = fields.get("transaction_hash")
    if paying is not None and paying != row["transaction_hash"]:
        _track_payout(tx, runtime, row, paying, answer.final_amount)
    status: Status = STATUS_OF_STATE.get(answer.state) or row["status"]
    if status == "failed":
        fields["failure"] = failure_reason(answer.state)
    if status == "completed" and row["status"] == "pending":  # through submitted, always
        store.move(tx, row["id"], "submitted", now, box=runtime.secrets)
    moved = status != row["status"] and store.move(
        tx, row["id"], status, now, box=runtime.secrets, **fields
    )
    if not moved and any(row[name] != value for name, value in fields.items()):
        store.update(tx, row["id"], now, box=runtime.secrets, **fields)
    current = store.get(tx, row["id"]) or row  # into the books, as it stands now
    postings.provider_state(tx, runtime, current, answer.state, current["status"] == "completed")
    return status if moved else None


def _track_payout(
    tx: Transaction, runtime: Runtime, row: Row, tx_hash: str, final_amount: str | None
) -> None:
    """Record an on-ramp's payout into a wallet of the organization as a tracked
    transaction of that wallet (type ``deposit``), so the indexer confirms it and
    ``transaction.confirmed`` fires. Its sender is the provider's, unknown here: the
    zero address until the receipt, which carries the real one, is indexed."""
    destination = store.Side.loads(row["destination"])
    wallet = wallets.by_address(tx, row["org_id"], str(destination.address))
    chain_id = int(row["chain_id"])
    if wallet is None or tracked.by_hash(tx, row["org_id"], chain_id, tx_hash) is not None:
        return
    usdc = runtime.chains.get(chain_id).addresses["USDC"]
    request = RecordTransaction.model_validate(
        {
            "hash": tx_hash,
            "type": "deposit",
            "from": ZERO_ADDRESS,
            "contract": usdc,
            "token": usdc,
            "amount": str(
                raw_amount(runtime, chain_id, Amount.of(final_amount or destination.amount, "USDC"))
            ),
            "walletId": wallet["id"],
        }
    )
    tracked.insert(tx, row["org_id"], chain_id, request, wallet, runtime.now_text())
