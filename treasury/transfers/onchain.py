"""The on-chain executor: swaps into and out of `c0` (deposit, withdraw, and the virtual
wallets' sweeps), signed from a custody wallet, written ahead of their broadcast.

Under the wallet's signing lock: read its mined nonce, then its token and ETH balances
and the allowance; sign the legs — an `approval` of exactly the amount when the
allowance, less what this wallet's unfinished swaps may still spend of it, is short (for
USDT, a reset to 0 first when the allowance is non-zero), then the facility call of
the chain's exit path (`treasury.evm.facility`: ``swap(tokenIn, tokenOut, amount,
recipient)``, or ``replaceAssetWithM`` out of c0 on M0's facility, refused when c0's M
float cannot take the amount at once) — with consecutive nonces; commit them
with the transfer (the claim), which first checks what they will hold (`Reserve`) against
the available balance (400, nothing written, when short); broadcast them (perform),
record the outcome. A crash anywhere after the claim is finished by the job, which
broadcasts the same bytes; after an ambiguous broadcast, it asks the chain for evidence
first (`evidence`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._infra.chains import ETH, TokenMetadata
from .._infra.idempotency import Upstream
from .._infra.runtime import Runtime
from .._records import nonces, policy, wallets
from .._records import transactions as tracked
from .._records.transactions import RecordTransaction
from .._records.transfers import CLAIMED, RECORDED, Status
from ..backends.chain.base import Chain
from ..backends.storage.base import Row, Transaction
from ..errors import UpstreamError, ValidationError
from ..evm.abi import ALLOWANCE, APPROVE, BALANCE_OF, GET_ETH_BALANCE
from ..evm.facility import exchanges
from ..evm.multicall import multicall
from ..evm.signing import broadcast
from ..money import Amount, AmountRefused
from . import store
from .executor import executor
from .models import Transfer
from .refusals import GasShort

APPROVE_GAS = 100_000


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


@dataclass(frozen=True)
class Station:
    """An organization's gas station (policy `gasStation`) as the chain showed it: its
    address, its ETH and how many of its transactions were mined when that was read."""

    address: str
    eth: int
    mined: int


@dataclass(frozen=True)
class Reserve:
    """What a transfer will hold of its source wallet until it is final (`raw` units of
    `token`, `wei` of gas at its signed fee), and what the chain showed the wallet
    holding: `balance` and `eth`, read after `mined` of its transactions were mined.
    `check` compares them with what the wallet's unfinished transfers already hold; with
    a gas `station`, the station's ETH may pay the gas the wallet lacks (`short_of_gas`:
    the legs then wait for its top-up before they are sent)."""

    chain_id: int
    wallet: str
    token: str
    raw: int
    wei: int
    balance: int
    eth: int
    mined: int
    units: TokenMetadata  # the token's, for the refusal's text
    station: Station | None = None

    def short_of_gas(self, tx: Transaction) -> bool:
        """Whether the wallet's own ETH, less what its unfinished transfers hold for gas,
        cannot pay this transfer's gas."""
        _, held_wei = nonces.reserved(tx, self.chain_id, self.wallet, self.token, self.mined)
        return max(self.eth - held_wei, 0) < self.wei

    def check(self, tx: Transaction) -> None:
        """400 unless the available balance covers the amount and the gas (call under
        the wallet's lock across processes, in the transaction that stores the claim)."""
        held_raw, held_wei = nonces.reserved(tx, self.chain_id, self.wallet, self.token, self.mined)
        symbol, decimals = self.units.symbol, self.units.decimals
        available = max(self.balance - held_raw, 0)
        if available < self.raw:
            requested = Amount.from_raw(self.raw, decimals, symbol)
            raise AmountRefused(
                f"insufficient balance: available {Amount.from_raw(available, decimals, symbol)},"
                f" requested {requested.units}"
            )
        gas = max(self.eth - held_wei, 0)
        if gas >= self.wei:
            return
        if self.station is not None:
            _, station_held = nonces.reserved(
                tx, self.chain_id, self.station.address, self.token, self.station.mined
            )
            topping = nonces.topping_up(tx, self.chain_id, self.station.address)
            spare = max(self.station.eth - station_held - topping, 0)
            if spare >= self.wei - gas:
                return  # the station pays what the wallet lacks; the legs wait for it
            raise GasShort(
                f"not enough ETH for gas: available {_eth(gas)}, needed {_eth(self.wei).units},"
                f" and the gas station has {_eth(spare)} to spare"
            )
        raise GasShort(
            f"not enough ETH for gas: available {_eth(gas)}, needed {_eth(self.wei).units}"
        )

    def columns(self, tx: Transaction) -> dict[str, str]:
        """The transfer's reservation columns (call after `check`); a transfer whose
        wallet waits for the gas station's top-up waits with ``"insufficient gas"``."""
        columns = {
            "reserve_token": self.token,
            "reserve_raw": str(self.raw),
            "reserve_wei": str(self.wei),
        }
        if self.station is not None and self.short_of_gas(tx):
            columns["waiting_reason"] = "insufficient gas"
        return columns


@dataclass(frozen=True)
class Holdings:
    """A wallet as the chain shows it: its mined nonce, read first, then its balance of
    one token, that token's allowance to the swap facility and its ETH."""

    mined: int
    balance: int
    allowance: int
    eth: int


def holdings(chain: Chain, wallet: str, token: str) -> Holdings:
    """Read the mined nonce before the balances: a leg mined between the two reads is
    then held twice (refused now, accepted a moment later), never counted as spent."""
    mined = chain.mined_nonce(wallet)
    facility = chain.addresses["swap_facility"]
    balance, allowance, eth = multicall(
        chain,
        [
            (token, BALANCE_OF, (wallet,)),
            (token, ALLOWANCE, (wallet, facility)),
            (chain.addresses["multicall"], GET_ETH_BALANCE, (wallet,)),
        ],
    )
    if balance is None or allowance is None or eth is None:
        raise UpstreamError(f"token {token} did not answer balance and allowance")
    return Holdings(mined, int(str(balance[0])), int(str(allowance[0])), int(str(eth[0])))


def gas_price(fees: dict[str, int]) -> int:
    return fees.get("maxFeePerGas", fees.get("gasPrice", 0))


Planned = list[tuple[str, str, int, bytes, int]]  # kind, to, amount, data, gas


def _planned(
    runtime: Runtime, chain: Chain, swap: Swap, held: Holdings, spoken_for: int | None = None
) -> Planned:
    """The legs a swap takes now: an approval when the allowance (less what unfinished
    swaps may still spend of it, `spoken_for` when the caller knows it) is short, then
    the swap."""
    facility = chain.addresses["swap_facility"]
    if spoken_for is None:
        with runtime.storage.read() as tx:
            spoken_for = nonces.unconfirmed_swaps(
                tx, swap.chain_id, swap.wallet, swap.token_in, facility
            )
    planned: Planned = []
    if held.allowance - spoken_for < swap.raw:  # an earlier swap may not have spent it yet
        if swap.usdt and held.allowance > 0:
            planned.append(("approval", swap.token_in, 0, APPROVE.encode(facility, 0), APPROVE_GAS))
        data = APPROVE.encode(facility, swap.raw)
        planned.append(("approval", swap.token_in, swap.raw, data, APPROVE_GAS))
    decimals = runtime.chains.decimals(swap.chain_id, swap.token_in)
    (move,) = exchanges(
        chain, swap.token_in, swap.token_out, swap.raw, swap.recipient, decimals=decimals
    )
    planned.append((swap.swap_kind, facility, swap.raw, move.data, move.gas))
    return planned


def _reserve(
    runtime: Runtime, swap: Swap, held: Holdings, fees: dict[str, int], planned: Planned
) -> Reserve:
    return Reserve(
        chain_id=swap.chain_id,
        wallet=swap.wallet,
        token=swap.token_in,
        raw=swap.raw,
        wei=gas_price(fees) * sum(gas for *_, gas in planned),
        balance=held.balance,
        eth=held.eth,
        mined=held.mined,
        units=runtime.chains.token(swap.chain_id, swap.token_in),
    )


def sign_legs(runtime: Runtime, chain: Chain, swap: Swap) -> tuple[list[store.Leg], Reserve]:
    """Sign the legs (call under the wallet's lock) and what they will hold: the
    claim checks it against the wallet's other unfinished transfers."""
    held = holdings(chain, swap.wallet, swap.token_in)
    with runtime.storage.read() as tx:
        floor = nonces.next_free_nonce(tx, swap.chain_id, swap.wallet)
    planned = _planned(runtime, chain, swap, held)
    fees = chain.offered_fees()
    nonce = max(chain.pending_nonce(swap.wallet), floor)
    legs = []
    for i, (kind, to, amount, data, gas) in enumerate(planned):
        signed = runtime.signer.sign(
            chain,
            custody_ref=swap.custody_ref,
            nonce=nonce + i,
            to=to,
            data=data,
            gas=gas,
            fees=fees,
        )
        legs.append(store.Leg(kind, to, swap.token_in, amount, signed))
    return legs, _reserve(runtime, swap, held, fees, planned)


def unsigned_reserve(runtime: Runtime, chain: Chain, swap: Swap) -> Reserve:
    """What a swap awaiting approval holds: its legs as they would be signed now, at
    today's fee, none of them signed (they are signed once it is approved)."""
    held = holdings(chain, swap.wallet, swap.token_in)
    planned = _planned(runtime, chain, swap, held)
    return _reserve(runtime, swap, held, chain.offered_fees(), planned)


def send_reserve(runtime: Runtime, chain: Chain, wallet: str, token: str, raw: int) -> Reserve:
    """What a plain token send (an off-ramp's) will hold of `wallet`, at today's fee."""
    held = holdings(chain, wallet, token)
    return Reserve(
        chain_id=chain.chain_id,
        wallet=wallet,
        token=token,
        raw=raw,
        wei=gas_price(chain.offered_fees()) * APPROVE_GAS,
        balance=held.balance,
        eth=held.eth,
        mined=held.mined,
        units=runtime.chains.token(chain.chain_id, token),
    )


def station(runtime: Runtime, chain: Chain, org_id: str, wallet: str) -> Station | None:
    """The organization's gas station as the chain shows it now (None without one, or
    when it is the paying wallet itself)."""
    with runtime.storage.read() as tx:
        number = policy.read(tx, org_id).gas_station
        row = None if number is None else wallets.by_number(tx, org_id, number)
    if row is None or row["address"] == wallet:
        return None
    mined = chain.mined_nonce(row["address"])
    return Station(address=row["address"], eth=eth_balance(chain, row["address"]), mined=mined)


def eth_balance(chain: Chain, wallet: str) -> int:
    """A wallet's ETH, in wei."""
    (found,) = multicall(chain, [(chain.addresses["multicall"], GET_ETH_BALANCE, (wallet,))])
    if found is None:
        raise UpstreamError("the multicall contract did not answer an ETH balance")
    return int(str(found[0]))


def raw_amount(runtime: Runtime, chain_id: int, amount: Amount) -> int:
    """Raw units of `amount` in its token of the chain (the token's key in the chain's
    addresses: ``"USDC"``, ``"c0"``), at the decimals the token has (`AmountRefused` if
    finer)."""
    return amount.to_raw(runtime.chains.decimals(chain_id, amount.token))


def _eth(wei: int) -> Amount:
    return Amount.from_raw(wei, ETH.decimals, "ETH")


@dataclass(frozen=True)
class Refused:
    """A leg the node refused after earlier legs went out: the transfer fails, and only
    the legs before `position` are tracked."""

    position: int
    message: str


@dataclass(frozen=True)
class Replaced:
    """The wallet's mined nonce passed the transfer's moving leg with no receipt of its
    hash: it was never mined and never will be."""

    message: str = "replaced: another transaction took the leg's nonce"


def evidence(chain: Chain, sender: str, leg: store.Leg) -> str | None:
    """What the chain proves of a leg whose sending was ambiguous: ``"mined"`` (its
    receipt), ``"replaced"`` (its nonce passed without it), or None (not yet known).
    The nonce is read first: a receipt that appears meanwhile is still seen."""
    mined = chain.mined_nonce(sender)
    if chain.receipts([leg.signed.hash])[0] is not None:
        return "mined"
    return "replaced" if mined > leg.signed.nonce else None


@dataclass(frozen=True)
class Deferred:
    """Nothing was broadcast: the wallet waits for its gas station's top-up; the legs
    are stored and the job sends them once the wallet can pay (`transfers.jobs`)."""


#: What broadcasting a transfer's legs came to: all sent (None), a leg refused after
#: earlier ones went out, the moving leg replaced, or nothing sent yet (waiting for gas).
Sent = Refused | Replaced | Deferred | None


def steps(runtime: Runtime) -> Upstream[Sent, Transfer]:
    """Perform (broadcast the stored legs), record (submitted, legs tracked), abandon;
    keep: once a broadcast was ambiguous, only the chain's evidence settles it."""

    def perform(transfer_id: str) -> Sent:
        with runtime.storage.read() as tx:
            row = store.get(tx, transfer_id)
            legs = store.legs(tx, transfer_id)
        if row is None or row["stage"] != CLAIMED:
            return None  # finished meanwhile by another finisher
        if row["waiting_reason"] == "insufficient gas" and not row["ambiguous"]:
            return Deferred()  # the gas station's top-up comes first (`reprice`)
        chain = runtime.chains.get(row["chain_id"])
        doubted = bool(row["ambiguous"])
        with runtime.signer.holding(row["chain_id"], row["wallet_address"]):
            if doubted:
                found = evidence(chain, row["wallet_address"], legs[-1])
                if found is not None:
                    return Replaced() if found == "replaced" else None
            for position, leg in enumerate(legs):
                try:
                    broadcast(chain, [leg.signed])
                except UpstreamError as error:
                    if error.ambiguous or position == 0 or doubted:
                        raise  # nothing moved (abandon), or only evidence can tell
                    return Refused(position, error.message)  # earlier legs went out
        return None

    def record(tx: Transaction, row: Row, sent: Sent) -> None:
        record_sent(runtime, tx, row, sent, "submitted")

    return executor(runtime, perform, record)


def record_sent(
    runtime: Runtime, tx: Transaction, row: Row, sent: Sent, status: Status | None
) -> None:
    """Record a claim's broadcast: its legs marked sent; failed when a leg was refused
    after earlier ones went out (those tracked) or the moving leg was replaced; else
    every leg tracked and the moving leg's hash recorded, the transfer moving to
    `status` (None: it stays where it is, for the provider to move)."""
    transfer_id, now = row["id"], runtime.now_text()
    legs = store.legs(tx, transfer_id)
    if isinstance(sent, Deferred):  # recorded: its legs are the job's to send
        track_legs(tx, row, legs, now)
        store.update(tx, transfer_id, now, box=runtime.secrets, stage=RECORDED)
        return
    store.mark_sent(tx, transfer_id)
    if isinstance(sent, Refused):
        track_legs(tx, row, legs[: sent.position], now)
    if sent is not None:
        store.fail_claim(tx, transfer_id, now, runtime.secrets, sent.message)
        return
    track_legs(tx, row, legs, now)
    fields = {"stage": RECORDED, "transaction_hash": legs[-1].signed.hash}
    if status is None:
        store.update(tx, transfer_id, now, box=runtime.secrets, **fields)
    else:
        store.move(tx, transfer_id, status, now, box=runtime.secrets, **fields)


def follow_versions(
    tx: Transaction, runtime: Runtime, chain: Chain, row: Row, legs: list[store.Leg]
) -> None:
    """A transfer some of whose legs were replaced at higher fees, once settled: its
    `transactionHash` and its tracked transactions follow the versions that were mined."""
    older = store.versions(tx, row["id"])
    now, chain_id = runtime.now_text(), int(row["chain_id"])
    for position, leg in enumerate(legs):
        hashes = [leg.signed.hash, *older.get(position, [])]
        if len(hashes) == 1:
            continue
        mined = next((r for r in chain.receipts(hashes) if r is not None), None)
        if mined is None:
            continue
        if mined.transaction_hash != leg.signed.hash:  # tracked as its current version
            tracked.rehash(tx, chain_id, leg.signed.hash, mined.transaction_hash, now)
        if position == len(legs) - 1 and mined.transaction_hash != row["transaction_hash"]:
            store.update(
                tx, row["id"], now, box=runtime.secrets, transaction_hash=mined.transaction_hash
            )


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
                "hash": leg.signed.hash,
                "type": leg.kind,
                "from": address,
                "contract": leg.contract,
                "token": leg.token,
                "amount": str(leg.amount),
                "walletId": wallet["id"],
            }
        )
        tracked.insert(tx, org_id, chain_id, request, wallet, now)


# -- payout runs: several swaps of one wallet at once -----------------------------------


@dataclass(frozen=True)
class Plan:
    """A swap's legs as they will be signed (none signed yet: `sign_plans`), and what the
    swap will hold of its wallet."""

    swap: Swap
    legs: Planned
    reserve: Reserve
    fees: dict[str, int]


def plan_swaps(runtime: Runtime, chain: Chain, swaps: list[Swap]) -> list[Plan | ValidationError]:
    """Swaps of one wallet planned as if signed one after another (a payout run): the
    wallet read once per token, today's fee read once, and each swap's approval decided
    with what the swaps before it may still spend of the allowance. A swap refused now
    (c0 cannot give its amount back) is its 400 in its place, and spends nothing."""
    fees = chain.offered_fees()
    facility = chain.addresses["swap_facility"]
    held: dict[str, Holdings] = {}
    spoken_for: dict[str, int] = {}
    plans: list[Plan | ValidationError] = []
    for swap in swaps:
        token = swap.token_in
        if token not in held:
            held[token] = holdings(chain, swap.wallet, token)
            with runtime.storage.read() as tx:
                spoken_for[token] = nonces.unconfirmed_swaps(
                    tx, swap.chain_id, swap.wallet, token, facility
                )
        try:
            planned = _planned(runtime, chain, swap, held[token], spoken_for[token])
        except ValidationError as error:
            plans.append(error)
            continue
        spoken_for[token] += swap.raw
        plans.append(Plan(swap, planned, _reserve(runtime, swap, held[token], fees, planned), fees))
    return plans


def sign_plans(
    runtime: Runtime, chain: Chain, plans: list[Plan], nonce: int
) -> list[list[store.Leg]]:
    """Sign planned swaps of one wallet, their legs with consecutive nonces from `nonce`
    in order, in one call to custody (call under the wallet's lock)."""
    if not plans:
        return []
    wanted = []
    for plan in plans:
        for _, to, _, data, gas in plan.legs:
            wanted.append({"nonce": nonce, "to": to, "data": data, "gas": gas, "fees": plan.fees})
            nonce += 1
    custody_ref = plans[0].swap.custody_ref
    signed = iter(runtime.signer.sign_many(chain, custody_ref=custody_ref, transactions=wanted))
    return [
        [
            store.Leg(kind, to, plan.swap.token_in, amount, next(signed))
            for kind, to, amount, _, _ in plan.legs
        ]
        for plan in plans
    ]
