"""The sweep job: a virtual wallet's USDC and USDT above the sweep minimum become c0.

A sweep is a transfer (pairing ``sweep``, a row of the transfers table, claimed and
finished as an API swap is); the virtual wallets are read through `_records.wallets`.

For each virtual wallet on the primary chain (balances read in multicall batches), a
token whose balance exceeds the minimum is swapped whole into c0 held by the same
wallet, as a transfer in the feed (``usdc`` or ``usdt`` → ``c0``, both sides the wallet),
completed when the swap confirms. A wallet with a sweep still open is left alone; one
without ETH for gas is skipped and counted (``virtual_wallets_without_gas``), and tried
again at the next pass, not in a loop.
"""

from __future__ import annotations

from .._infra import idempotency
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records import wallets
from .._records.transfers import OPEN
from ..errors import ValidationError
from ..evm.abi import BALANCE_OF, GET_ETH_BALANCE
from ..evm.multicall import multicall
from ..money import to_raw, to_units
from . import onchain
from .models import Currency, Pairing
from .operations import claim_transfer, onchain_side

WALLETS_PER_CALL = 33  # three sub-calls each: about 100 per multicall
SWEEP: Pairing = "sweep"
OPEN_SWEEPS = (
    f"SELECT wallet_address FROM transfers WHERE pairing = '{SWEEP}'"
    f" AND status IN {OPEN} AND wallet_address IS NOT NULL"
)


def sweep_virtual_wallets(runtime: Runtime, report: Report) -> None:
    with runtime.storage.read() as tx:
        open_sweeps = {row["wallet_address"] for row in tx.query(OPEN_SWEEPS)}
        rows = [row for row in wallets.virtual(tx) if row["address"] not in open_sweeps]
    if not rows:
        return
    chain_id = runtime.chains.primary
    chain = runtime.chains.get(chain_id)
    if "c0" not in chain.addresses:
        where = f"chain {chain_id}"
        message = f"{where} has no c0 address (chains.{chain_id}.addresses.c0): nothing swept"
        report.condition(where, message, count="chains_without_c0")
        return
    tokens: dict[Currency, str] = {"usdc": chain.addresses["USDC"]}
    if "USDT" in chain.addresses:  # Sepolia has none
        tokens["usdt"] = chain.addresses["USDT"]
    width = len(tokens) + 1  # calls per wallet: its tokens, then its ETH
    minimum = {
        symbol: to_raw(runtime.sweep_minimum, runtime.chains.decimals(chain_id, token))
        for symbol, token in tokens.items()
    }
    for start in range(0, len(rows), WALLETS_PER_CALL):
        batch = rows[start : start + WALLETS_PER_CALL]
        calls = [
            call
            for row in batch
            for call in (
                *((token, BALANCE_OF, (row["address"],)) for token in tokens.values()),
                (chain.addresses["multicall"], GET_ETH_BALANCE, (row["address"],)),
            )
        ]
        results = multicall(chain, calls)
        for i, row in enumerate(batch):
            *held, eth = (int(str(r[0])) if r else 0 for r in results[width * i : width * (i + 1)])
            balances = tuple(zip(tokens, held, strict=True))
            due = [(symbol, raw) for symbol, raw in balances if raw > minimum[symbol]]
            if not due:
                continue
            where = f"virtual wallet {row['address']}"
            if eth == 0:
                report.condition(
                    where,
                    f"{where} has no ETH for gas: not swept",
                    count="virtual_wallets_without_gas",
                )
                continue
            symbol, raw = due[0]  # one sweep per wallet at a time
            with report.part(where):
                try:
                    started = _sweep(runtime, chain_id, row, symbol, tokens[symbol], raw)
                except ValidationError as short:  # not enough ETH for the legs' gas
                    report.condition(
                        where, f"{where} not swept: {short}", count="virtual_wallets_without_gas"
                    )
                    continue
                if started:
                    report.add(sweeps_started=1)


def _sweep(
    runtime: Runtime, chain_id: int, row: dict[str, str], symbol: Currency, token: str, raw: int
) -> bool:
    """Sign and start one sweep; False when another worker's sweep of the wallet is
    open (its signed legs are dropped unsent)."""
    chain = runtime.chains.get(chain_id)
    amount = to_units(raw, runtime.chains.decimals(chain_id, token))
    swap = onchain.Swap(
        chain_id=chain_id,
        wallet=row["address"],
        custody_ref=row["custody_ref"],
        token_in=token,
        token_out=chain.addresses["c0"],
        raw=raw,
        recipient=row["address"],
        usdt=symbol == "usdt",
    )
    with runtime.signer.holding(chain_id, swap.wallet):
        legs, reserve = onchain.sign_legs(runtime, chain, swap)
        write = claim_transfer(
            runtime,
            row["org_id"],
            pairing=SWEEP,
            chain_id=chain_id,
            amount=amount,
            developer_fee="0",
            client_reference_id=None,
            wallet=swap.wallet,
            bank_account_id=None,
            sides={
                "source": onchain_side(swap.wallet, chain_id, symbol, amount),
                "destination": onchain_side(swap.wallet, chain_id, "c0", amount),
            },
            legs=legs,
            reserve=reserve,
        )
        with runtime.storage.transaction() as tx:
            tx.lock(f"sweep:{swap.wallet}")  # another worker may have swept it meanwhile
            if tx.one(f"{OPEN_SWEEPS} AND wallet_address = ?", (swap.wallet,)):
                return False
            transfer_id = write(tx)
        idempotency.finish(runtime, row["org_id"], transfer_id, onchain.steps(runtime))
    return True
