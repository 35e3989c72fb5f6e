"""Token balances of an address: one Multicall3 `eth_call` per 100 tokens.

A token's name, symbol and decimals are read with its first balance and then cached per
chain, so later calls ask for balances only. The chain's own coin (ETH, which pays for
gas) is read in the first call too (Multicall3 `getEthBalance`) and listed last, under
the native-asset address of EIP-7528.
"""

from __future__ import annotations

from .._infra.chains import ETH, metadata_calls
from .._infra.group import Group
from .._infra.models import Address, ListOf
from .._infra.validation import parse_value
from ..evm.abi import BALANCE_OF, GET_ETH_BALANCE, Function
from ..evm.multicall import multicall
from .models import TokenBalance

TOKENS_PER_CALL = 100
NATIVE = "0x" + "e" * 40  # EIP-7528: the address that stands for the chain's own coin


class Balances(Group):
    name = "balances"

    def get(self, chain_id: int, address: str) -> ListOf[TokenBalance]:
        """Balances of every token configured on the chain (tokens that fail are left out)."""
        runtime = self._scope.runtime
        chain = runtime.chains.get(chain_id)
        known = runtime.chains.known(chain_id)
        address = str(parse_value(Address, address, "path", "address"))
        tokens = list(chain.tokens)
        multicall_at = chain.addresses.get("multicall")
        items: list[TokenBalance] = []
        native = None
        for start in range(0, max(len(tokens), 1), TOKENS_PER_CALL):
            chunk = tokens[start : start + TOKENS_PER_CALL]
            calls: list[tuple[str, Function, tuple[object, ...]]] = []
            if start == 0 and multicall_at is not None:
                calls.append((multicall_at, GET_ETH_BALANCE, (address,)))
            for token in chunk:
                calls.append((token, BALANCE_OF, (address,)))
                if token not in known:
                    calls += metadata_calls(token)
            if not calls:
                continue
            results = iter(multicall(chain, calls))
            if start == 0 and multicall_at is not None:
                native = next(results)
            for token in chunk:
                balance = next(results)
                if token not in known and runtime.chains.remember(chain_id, token, results) is None:
                    continue
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
        if native is not None:
            items.append(
                TokenBalance(
                    token=NATIVE,
                    name=ETH.name,
                    symbol=ETH.symbol,
                    raw=str(native[0]),
                    decimals=ETH.decimals,
                )
            )
        return ListOf[TokenBalance](data=items)
