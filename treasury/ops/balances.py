"""Token balances of an address: one Multicall3 `eth_call` per 100 tokens."""

from __future__ import annotations

from .._runtime import Scope
from .._validation import parse_value
from ..models.chain import TokenBalance
from ..models.common import Address, ListOf
from ._abi import BALANCE_OF, DECIMALS, NAME, SYMBOL, multicall

TOKENS_PER_CALL = 100
_PER_TOKEN = (NAME, SYMBOL, DECIMALS)


class Balances:
    def __init__(self, scope: Scope):
        self._scope = scope

    def get(self, chain_id: int, address: str) -> ListOf[TokenBalance]:
        """Balances of every token configured on the chain (tokens that fail are left out)."""
        chain = self._scope.runtime.chains.get(chain_id)
        address = str(parse_value(Address, address, "path", "address"))
        tokens = list(chain.tokens)
        items: list[TokenBalance] = []
        for start in range(0, len(tokens), TOKENS_PER_CALL):
            chunk = tokens[start : start + TOKENS_PER_CALL]
            calls = [
                call
                for token in chunk
                for call in [(token, BALANCE_OF, (address,))] + [(token, f, ()) for f in _PER_TOKEN]
            ]
            results = multicall(chain, calls)
            for i, token in enumerate(chunk):
                balance, name, symbol, decimals = results[4 * i : 4 * i + 4]
                if balance is None or name is None or symbol is None or decimals is None:
                    continue
                items.append(
                    TokenBalance(
                        token=token,
                        name=str(name[0]),
                        symbol=str(symbol[0]),
                        raw=str(balance[0]),
                        decimals=int(str(decimals[0])),
                    )
                )
        return ListOf[TokenBalance](data=items)
