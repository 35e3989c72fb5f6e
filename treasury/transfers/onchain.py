"""The on-chain executor: swaps into and out of `c0` (deposit, withdraw, and the virtual
wallets' sweeps), signed from a custody wallet, written ahead of their broadcast.

Under the wallet's signing lock: check the token and ETH balances and the allowance
(400, nothing written, when short), sign the legs — an `approval` of exactly the amount
when the allowance, less what this wallet's unfinished swaps may still spend of it, is
short (for USDT, a reset to 0 first when the allowance is non-zero), then
``swap(tokenIn, tokenOut, amount, recipient)`` — with consecutive nonces, commit them
with the transfer (the claim), broadcast them (perform), record the outcome. A crash
anywhere after the claim is finished by the job, which broadcasts the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._infra.idempotency import Upstream
from .._infra.runtime import Runtime
from ..backends.chain.base import Chain
from ..backends.storage.base import Transaction
from ..errors import UpstreamError, ValidationError
from ..evm.abi import ALLOWANCE, APPROVE, BALANCE_OF, GET_ETH_BALANCE, SWAP
from ..evm.multicall import multicall
from ..evm.signing import broadcast
from ..money import to_raw
from ..transactions import store as tracked
from ..transactions.models import RecordTransaction
from ..wallets import store as wallets
from . import store
from .models import Transfer

APPROVE_GAS = 100_000
SWAP_GAS = 250_000


@dataclass(frozen=True)
class Swap:
    """What an on-chain transfer moves: `raw` units of `token_in`, swapped through the
    facility into `token_out` for `recipient`, signed by `wallet` (custody `custody_ref`)."""

    chain_id: int
    wallet: str
    custody_ref: str
    token_in: str
    token_out: str
    raw: int
    recipient: str
    usdt: bool = False  # token_in is USDT: an allowance must be reset to 0 before changing
    swap_kind: str = "deposit"  # the transaction type of the swap leg


def sign_legs(runtime: Runtime, chain: Chain, swap: Swap) -> list[store.Leg]:
    """Check balances and allowance, then sign the legs (call under the wallet's lock)."""
    facility = chain.addresses["swap_facility"]
    balance, allowance, eth = multicall(
        chain,
        [
            (swap.token_in, BALANCE_OF, (swap.wallet,)),
            (swap.token_in, ALLOWANCE, (swap.wallet, facility)),
            (chain.addresses["multicall"], GET_ETH_BALANCE, (swap.wallet,)),
        ],
    )
    if balance is None or allowance is None or eth is None:
        raise UpstreamError(f"token {swap.token_in} did not answer balance and allowance")
    if int(str(balance[0])) < swap.raw:
        raise ValidationError.field(
            "body", "amount", f"insufficient balance: the wallet holds {balance[0]} raw units"
        )
    current = int(str(allowance[0]))
    with runtime.storage.read() as tx:
        floor = store.next_unsent_nonce(tx, swap.chain_id, swap.wallet)
        spoken_for = store.unconfirmed_swaps(
            tx, swap.chain_id, swap.wallet, swap.token_in, facility
        )
    planned: list[tuple[str, str, int, bytes, int]] = []  # kind, to, amount, data, gas
    if current - spoken_for < swap.raw:  # an earlier swap may not have spent its approval yet
        if swap.usdt and current > 0:
            planned.append(("approval", swap.token_in, 0, APPROVE.encode(facility, 0), APPROVE_GAS))
        data = APPROVE.encode(facility, swap.raw)
        planned.append(("approval", swap.token_in, swap.raw, data, APPROVE_GAS))
    data = SWAP.encode(swap.token_in, swap.token_out, swap.raw, swap.recipient)
    planned.append((swap.swap_kind, facility, swap.raw, data, SWAP_GAS))
    fees = check_gas(chain, int(str(eth[0])), sum(gas for *_, gas in planned))
    nonce = max(chain.pending_nonce(swap.wallet), floor)
    legs = []
    for i, (kind, to, amount, data, gas) in enumerate(planned):
        signed = runtime.signer.sign(
            chain, custody_ref=swap.custody_ref, nonce=nonce + i, to=to, data=data, gas=gas,
            fees=fees,
        )  # fmt: skip
        legs.append(store.Leg(kind, to, swap.token_in, amount, signed))
    return legs


def raw_amount(amount: str, currency: str) -> int:
    """Raw units of a transfer amount (at most 6 places): USDC 6 decimals, c0 18."""
    return to_raw(amount, 18 if currency == "c0" else 6)


def check_usdc(chain: Chain, wallet: str, amount: str) -> None:
    """400 unless `wallet` holds `amount` USDC and the ETH to pay for sending it."""
    balance, eth = multicall(
        chain,
        [
            (chain.addresses["USDC"], BALANCE_OF, (wallet,)),
            (chain.addresses["multicall"], GET_ETH_BALANCE, (wallet,)),
        ],
    )
    if balance is None or eth is None:
        raise UpstreamError("USDC did not answer the wallet's balance")
    if int(str(balance[0])) < raw_amount(amount, "usdc"):
        raise ValidationError.field(
            "body", "amount", f"insufficient balance: the wallet holds {balance[0]} raw units"
        )
    check_gas(chain, int(str(eth[0])), APPROVE_GAS)


def check_gas(chain: Chain, eth: int, gas: int) -> dict[str, int]:
    """The fee fields to sign with; 400 unless `eth` pays for `gas` at their price."""
    fees = chain.fee_fields()
    price = fees.get("maxFeePerGas", fees.get("gasPrice", 0))
    if eth < price * gas:
        raise ValidationError.field("body", "source", "the wallet has not enough ETH for gas")
    return fees


@dataclass(frozen=True)
class Refused:
    """A leg the node refused after earlier legs went out: the transfer fails, and only
    the legs before `position` are tracked."""

    position: int
    message: str


def steps(runtime: Runtime) -> Upstream[Transfer]:
    """Perform (broadcast the stored legs), record (submitted, legs tracked), abandon."""

    def perform(transfer_id: str) -> object:
        with runtime.storage.read() as tx:
            row = store.get(tx, transfer_id)
            legs = store.legs(tx, transfer_id)
        if row is None or row["stage"] != "claimed":
            return None  # finished meanwhile by another finisher
        chain = runtime.chains.get(row["chain_id"])
        with runtime.signer.holding(row["chain_id"], row["wallet_address"]):
            for position, leg in enumerate(legs):
                try:
                    broadcast(chain, [leg.signed])
                except UpstreamError as error:
                    if error.ambiguous or position == 0:
                        raise  # nothing moved (abandon), or the job will find out
                    return Refused(position, error.message)  # earlier legs went out
        return None

    def record(tx: Transaction, transfer_id: str, failure: object) -> Transfer:
        row = store.get(tx, transfer_id)
        if row is None:
            raise UpstreamError("the transfer was abandoned meanwhile")
        if row["stage"] == "claimed":
            now = runtime.now_text()
            legs = store.legs(tx, transfer_id)
            store.mark_sent(tx, transfer_id)
            refused = failure if isinstance(failure, Refused) else None
            track_legs(tx, row, legs if refused is None else legs[: refused.position], now)
            if refused is None:
                swap_hash = legs[-1].signed.hash
                store.move(
                    tx, transfer_id, "submitted", now, stage="recorded", transaction_hash=swap_hash
                )
            else:
                store.move(
                    tx, transfer_id, "failed", now, stage="recorded", failure=refused.message
                )
            row = store.get(tx, transfer_id)
            assert row is not None
        return store.shown(row)

    return Upstream(perform=perform, record=record, abandon=store.remove)


def track_legs(tx: Transaction, row: dict[str, object], legs: list[store.Leg], now: str) -> None:
    """Record sent legs as tracked transactions of the wallet, when it is one of the
    organization's wallets (a virtual wallet's sweeps are only in the transfers feed)."""
    org_id, address = str(row["org_id"]), str(row["wallet_address"])
    wallet = wallets.by_address(tx, org_id, address)
    if wallet is None:
        return
    chain_id = int(str(row["chain_id"]))
    for leg in legs:
        if tracked.by_hash(tx, org_id, chain_id, leg.signed.hash) is not None:
            continue
        request = RecordTransaction.model_validate(
            {
                "hash": leg.signed.hash, "type": leg.kind, "from": address,
                "contract": leg.contract, "token": leg.token, "amount": str(leg.amount),
                "walletId": wallet["id"],
            }
        )  # fmt: skip
        tracked.insert(tx, org_id, chain_id, request, wallet, now)
