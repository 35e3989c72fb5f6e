"""Token balances of an address: one Multicall3 `eth_call` per 100 tokens.

A token's name, symbol and decimals are read with its first balance and then cached per
chain, so later calls ask for balances only.
"""

from __future__ import annotations

from .._infra.chains import TokenMetadata
from .._infra.group import Group
from .._infra.models import Address, ListOf
from .._infra.validation import parse_value
from ..evm.abi import BALANCE_OF, DECIMALS, NAME, SYMBOL, Function
from ..evm.multicall import multicall
from .models import TokenBalance

TOKENS_PER_CALL = 100
_METADATA = (NAME, SYMBOL, DECIMALS)


class Balances(Group):
    name = "balances"

    def get(self, chain_id: int, address: str) -> ListOf[TokenBalance]:
        """Balances of every token configured on the chain (tokens that fail are left out)."""
        runtime = self._scope.runtime
        chain = runtime.chains.get(chain_id)
        known = runtime.chains.token_metadata(chain_id)
        address = str(parse_value(Address, address, "path", "address"))
        tokens = list(chain.tokens)
        items: list[TokenBalance] = []
        for start in range(0, len(tokens), TOKENS_PER_CALL):
            chunk = tokens[start : start + TOKENS_PER_CALL]
            calls: list[tuple[str, Function, tuple[object, ...]]] = []
            for token in chunk:
                calls.append((token, BALANCE_OF, (address,)))
                if token not in known:
                    calls += [(token, function, ()) for function in _METADATA]
            results = iter(multicall(chain, calls))
            for token in chunk:
                balance = next(results)
                if token not in known:
                    name, symbol, decimals = next(results), next(results), next(results)
                    if name is None or symbol is None or decimals is None:
                        continue
                    known[token] = TokenMetadata(
                        str(name[0]), str(symbol[0]), int(str(decimals[0]))
                    )
                if balance is None:
                    continue
                meta = known[token]
                items.append(
                    TokenBalance(
                        token=token,
                        name=meta.name,
                        symbol=meta.symbol,
                        raw=str(balance[0]),
                        decimals=meta.decimals,
                    )
                )
        return ListOf[TokenBalance](data=items)
