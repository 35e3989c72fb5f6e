"""Token balances of an address: one Multicall3 `eth_call` per 100 tokens.

A token's name, symbol and decimals are read with its first balance and then cached per
chain, so later calls ask for balances only. The chain's own coin (ETH, which pays for
gas) is read in the first call too (Multicall3 `getEthBalance`) and listed last, under
the native-asset address of EIP-7528. The `aggregate3` call data of a (wallet, token set)
is built once and kept (the last `PAYLOADS_KEPT`), and balances are read from the answer
by `treasury.evm.multicall`'s own decoder: the Python side of a steady-state read costs
less than the node's work.
"""

from __future__ import annotations

from functools import lru_cache

from .._infra.chains import ETH, METADATA_VIEWS
from .._infra.group import Group
from .._infra.models import Address, ListOf
from .._infra.validation import parse_value
from ..evm.abi import BALANCE_OF, GET_ETH_BALANCE, address_word
from ..evm.multicall import call_aggregate3, decode_result, multicall_payload, uint256
from .models import TokenBalance

TOKENS_PER_CALL = 100
PAYLOADS_KEPT = 256  # (wallet, token set) call data kept, ~16 kB each for 100 tokens
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
            chunk = tuple(tokens[start : start + TOKENS_PER_CALL])
            native_at = multicall_at if start == 0 else None
            unknown = frozenset(token for token in chunk if token not in known)
            if not chunk and native_at is None:
                continue
            payload, count = _payload(address, chunk, unknown, native_at)
            results = iter(call_aggregate3(chain, payload, count))
            if native_at is not None:
                native = _uint256(next(results))
            for token in chunk:
                balance = _uint256(next(results))
                if token in unknown:
                    answers = (decode_result(view, next(results)) for view in METADATA_VIEWS)
                    if runtime.chains.remember(chain_id, token, answers) is None:
                        continue
                if balance is None:
                    continue
                meta = known[token]
                items.append(
                    TokenBalance(
                        token=token,
                        name=meta.name,
                        symbol=meta.symbol,
                        raw=str(balance),
                        decimals=meta.decimals,
                    )
                )
        if native is not None:
            items.append(
                TokenBalance(
                    token=NATIVE,
                    name=ETH.name,
                    symbol=ETH.symbol,
                    raw=str(native),
                    decimals=ETH.decimals,
                )
            )
        return ListOf[TokenBalance](data=items)


@lru_cache(maxsize=PAYLOADS_KEPT)
def _payload(
    address: str, tokens: tuple[str, ...], unknown: frozenset[str], native_at: str | None
) -> tuple[bytes, int]:
    """The `aggregate3` call data reading `address`'s balance of each of `tokens` (and
    the metadata of the `unknown` ones; and its ETH from the Multicall3 at `native_at`),
    with the number of calls it carries."""
    balance_of = BALANCE_OF.selector + address_word(address)  # the same for every token
    calls: list[tuple[str, bytes]] = []
    if native_at is not None:
        calls.append((native_at, GET_ETH_BALANCE.selector + address_word(address)))
    for token in tokens:
        calls.append((token, balance_of))
        if token in unknown:
            calls += [(token, view.selector) for view in METADATA_VIEWS]
    return multicall_payload(calls), len(calls)


def _uint256(data: bytes | None) -> int | None:
    return None if data is None else uint256(data)
