"""The swap facility's calls into and out of c0, by the chain's exit path
(`Chain.exit_path`): one place for what a deposit or a withdrawal signs.

- Into c0, on every chain: ``swap(tokenIn, c0, amount, recipient)``.
- Out of c0 on exit path ``swap`` (our devnet facility): ``swap(c0, tokenOut, amount,
  recipient)``.
- Out of c0 on ``replace_asset_with_m`` (M0's SwapFacility, where ``swap(c0, usdc, …)``
  reverts ``InvalidSwapPath``): ``replaceAssetWithM(tokenOut, c0, c0, amount,
  recipient)``. The facility unwraps the c0 into M, which c0 then takes in place of as
  much of its tokenOut, paid to `recipient`. One call moves at most c0's M float (its
  supply beyond its assets; ``InsufficientMBacking`` past it), which the exchange gives
  back, and all calls together at most c0's holding of tokenOut
  (``InsufficientAssetBacking``). Both are read first (`capacity`): a larger amount is
  split into calls within the float where the caller signs them one by one (prepare),
  and refused (400 at ``amount``) where it is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..backends.chain.base import Chain
from ..errors import Conflict, UpstreamError
from ..money import AmountRefused, to_units
from .abi import (
    ASSET_BALANCE_OF,
    IS_APPROVED_EXTENSION,
    REPLACE_ASSET_WITH_M,
    SWAP,
    TOTAL_ASSETS,
    TOTAL_SUPPLY,
)
from .multicall import multicall

__all__ = ["MAX_SPLIT", "REPLACE_GAS", "SWAP_GAS", "Capacity", "Exchange", "capacity", "exchanges"]

#: Gas limits of one facility call (measured on anvil with M0's contracts behind their
#: proxies: a swap into c0 about 190,000, a ``replaceAssetWithM`` about 180,000; our
#: devnet facility's swap less), with room for colder storage on a real chain.
SWAP_GAS = 250_000
REPLACE_GAS = 400_000
#: At most this many ``replaceAssetWithM`` calls for one prepared withdrawal.
MAX_SPLIT = 10


@dataclass(frozen=True)
class Exchange:
    """One facility call: its `data`, the `raw` units of tokenIn it moves, its gas."""

    data: bytes
    raw: int
    gas: int
    method: str  # "swap" or "replaceAssetWithM"


@dataclass(frozen=True)
class Capacity:
    """What c0 can give back now, raw: `per_call` (its M float) and `total` (its
    holding of the asset)."""

    per_call: int
    total: int


def capacity(chain: Chain, c0: str, asset: str) -> Capacity:
    """c0's M float and its holding of `asset`, read in one multicall; 409 when the
    facility does not take c0 as an extension (``isApprovedExtension``)."""
    facility = chain.address("swap_facility")
    supply, assets, held, approved = multicall(
        chain,
        [
            (c0, TOTAL_SUPPLY, ()),
            (c0, TOTAL_ASSETS, ()),
            (c0, ASSET_BALANCE_OF, (asset,)),
            (facility, IS_APPROVED_EXTENSION, (c0,)),
        ],
    )
    if supply is None or assets is None or held is None:
        raise UpstreamError(
            f"c0 at {c0} on chain {chain.chain_id} did not answer totalSupply, totalAssets"
            " and assetBalanceOf: is it an M0 JMI extension (exit_path replace_asset_with_m)?"
        )
    if approved is None or approved[0] is not True:
        raise Conflict(
            f"the swap facility {facility} of chain {chain.chain_id} does not approve c0 at"
            f" {c0} as an extension: check chains.{chain.chain_id}.addresses"
        )
    supply_raw, assets_raw = int(str(supply[0])), int(str(assets[0]))
    return Capacity(max(supply_raw - assets_raw, 0), int(str(held[0])))


def exchanges(
    chain: Chain,
    token_in: str,
    token_out: str,
    raw: int,
    recipient: str,
    *,
    decimals: int,
    most: int = 1,
) -> list[Exchange]:
    """The facility calls that turn `raw` of `token_in` (of `decimals`) into `token_out`
    for `recipient`: one, or, out of c0 on ``replace_asset_with_m``, up to `most` calls
    each within c0's M float; `AmountRefused` when c0 cannot give that much back now."""
    c0 = chain.address("c0")
    if token_in != c0 or chain.exit_path == "swap":
        data = SWAP.encode(token_in, token_out, raw, recipient)
        return [Exchange(data, raw, SWAP_GAS, "swap")]
    room = capacity(chain, c0, token_out)
    symbol = next((k for k in ("USDC", "USDT") if chain.addresses.get(k) == token_out), token_out)

    def units(amount: int) -> str:
        return to_units(amount, decimals)

    where = f"on chain {chain.chain_id}"
    if room.total < raw:
        problem = (
            f"c0 holds {units(room.total)} {symbol} {where}: at most that much c0 can be"
            f" exchanged back now, requested {units(raw)}"
        )
    elif room.per_call == 0:
        problem = f"c0 has no M float {where}: no c0 can be exchanged back now"
    elif -(-raw // room.per_call) > most:
        times = "at once" if most == 1 else f"in {most} calls"
        problem = (
            f"c0's M float {where} lets at most {units(room.per_call * most)} c0 be exchanged"
            f" back {times} now, requested {units(raw)}"
        )
    else:
        parts = [room.per_call] * (raw // room.per_call)
        if raw % room.per_call:
            parts.append(raw % room.per_call)
        return [
            Exchange(
                REPLACE_ASSET_WITH_M.encode(token_out, c0, c0, part, recipient),
                part,
                REPLACE_GAS,
                "replaceAssetWithM",
            )
            for part in parts
        ]
    raise AmountRefused(problem)
