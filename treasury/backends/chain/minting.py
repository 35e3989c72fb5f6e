"""The test-chain interface: a local chain whose test contracts we own.

Not part of `Chain`: the core never mints. The devnet implements it, and so does an
``http://`` chain configured with a ``minter_key`` (an anvil node started by
``treasury devnet``). Callers ask ``isinstance(chain, MintingChain)``: the test helpers
(``POST /v1/test-helpers/{chainId}/faucet``, ``treasury faucet``), the sandbox fiat
provider's on-ramp payouts, and the yield trial. `minter_key` owns the test contracts: it
mints, and it operates the yield distributor, so the yields domain posts roots with it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol, runtime_checkable

__all__ = ["MintingChain"]


@runtime_checkable
class MintingChain(Protocol):
    """A chain that can mint: our test contracts are owned by `minter_key`."""

    @property
    def minter_key(self) -> str:
        """The private key (0x hex) of the account that owns the test contracts: the c0
        and stablecoin minter and the yield distributor's operator. A well-known dev key,
        never a real chain's."""
        ...

    def faucet(self, address: str, symbol: str, amount: str | int | Decimal) -> str:
        """Mint `amount` whole units of ``USDC``, ``USDT`` or ``c0`` to `address`, or send
        it ``ETH``; return the mined transaction's hash. `ValueError` for a bad symbol or
        amount."""
        ...
