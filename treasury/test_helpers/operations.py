"""Test helpers (as Stripe's ``test_helpers``): fund an address on a chain that can mint."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._infra.group import Group
from .._infra.validation import parse_input
from ..backends.chain.minting import MintingChain
from ..errors import NotFound
from ..money import Amount, AmountRefused
from .models import Faucet, Funded


class TestHelpers(Group):
    """Only on a test chain (`MintingChain`): the in-process devnet, or an anvil node started
    by `treasury devnet`; elsewhere every helper is a 404."""

    name = "test_helpers"
    __test__ = False  # not a test class, whatever pytest thinks of the name

    def faucet(
        self, chain_id: int, body: Faucet | Mapping[str, Any] | None = None, **fields: Any
    ) -> Funded:
        """Mint USDC, USDT or c0 to an address, or send it ETH; waits until mined."""
        chain = self._scope.runtime.chains.get(chain_id)
        if not isinstance(chain, MintingChain):
            raise NotFound(f"Chain {chain_id} has no test helpers")
        request = parse_input(Faucet, body, fields)
        amount = Amount.of(request.amount, request.token)
        try:
            amount.to_raw(self._scope.runtime.chains.decimals(chain_id, amount.token))
        except AmountRefused as refused:
            raise refused.at("body", "amount") from None
        tx_hash = chain.faucet(request.address, request.token, request.amount)
        return Funded(
            chain_id=chain_id,
            address=request.address,
            token=request.token,
            amount=request.amount,
            transaction_hash=tx_hash,
        )
