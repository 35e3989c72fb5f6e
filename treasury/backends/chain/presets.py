"""What a chain starts from when its configuration leaves something out: the public
addresses of Ethereum (1) and Sepolia (11155111), and each chain's payment rail.

A chain given by URL alone for chain id 1 or 11155111 starts from `PRESETS`; configured
addresses override any of them (`with_preset`). c0 has no public address: a chain
without one refuses the operations that need it (`Chain.address`, 409 naming the
setting). The exit path (how c0 goes back to a stablecoin) belongs to the swap facility:
M0's SwapFacility exits through ``replaceAssetWithM``; any other facility (our devnet's,
deployed by ``treasury devnet``) through its direct ``swap``, unless configured.

The fiat provider names chains by payment rail (Bridge's ``payment_rail``). Its sandbox
settles the test networks under the names of their main networks (its rail list has no
testnet names), so Sepolia's rail is ``ethereum``, like the local development chains'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .base import CANONICAL_MULTICALL3, ChainConfig

__all__ = ["PRESETS", "RAILS", "Preset", "with_preset"]

#: M0's SwapFacility (the same address on Ethereum and Sepolia).
M0_SWAP_FACILITY = "0xb6807116b3b1b321a390594e31ecd6e0076f6278"
#: M0's M token, whose ``earnerRate()`` is the yield estimate's source.
M_ADDRESS = "0x866a2bf4e572cbcf37d5071a7a58503bfb36be1b"


@dataclass(frozen=True)
class Preset:
    """The public addresses of a network, its payment rail and its facility's exit path."""

    name: str
    addresses: Mapping[str, str] = field(default_factory=dict)
    rail: str | None = None
    exit_path: str = "replace_asset_with_m"


PRESETS: Mapping[int, Preset] = {
    1: Preset(
        "Ethereum",
        {
            "USDC": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
            "USDT": "0xdac17f958d2ee523a2206206994597c13d831ec7",
            "swap_facility": M0_SWAP_FACILITY,
            "earner_rate_source": M_ADDRESS,
            "multicall": CANONICAL_MULTICALL3,
        },
        rail="ethereum",
    ),
    11155111: Preset(
        "Sepolia",
        {
            "USDC": "0x1c7d4b196cb0c7b01d743fbc6116a902379c7238",
            "swap_facility": M0_SWAP_FACILITY,
            "earner_rate_source": M_ADDRESS,
            "multicall": CANONICAL_MULTICALL3,
        },
        rail="ethereum",
    ),
}

#: Payment rail of chains without a preset (``ChainConfig.rail`` overrides any of them).
RAILS: Mapping[int, str] = {
    1: "ethereum",
    11155111: "ethereum",  # the provider's sandbox settles Sepolia as Ethereum
    31337: "ethereum",  # local development chains settle as Ethereum
    1337: "ethereum",
    8453: "base",
    137: "polygon",
    42161: "arbitrum",
    10: "optimism",
}


def with_preset(config: ChainConfig) -> ChainConfig:
    """`config` with what it leaves out taken from its chain's preset: the addresses it
    does not name, the rail (else `RAILS`), and the exit path (the preset's while the
    swap facility is the preset's, else ``swap``)."""
    preset = PRESETS.get(config.chain_id, Preset(""))
    addresses = {**preset.addresses, **config.addresses}
    facility = addresses.get("swap_facility")
    own_facility = facility is not None and facility == preset.addresses.get("swap_facility")
    return replace(
        config,
        addresses=addresses,
        rail=config.rail or preset.rail or RAILS.get(config.chain_id),
        exit_path=config.exit_path or (preset.exit_path if own_facility else "swap"),
    )
