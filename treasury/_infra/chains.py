"""The configured chains, opened lazily on first use and shared by every thread, with
what is immutable about them cached per chain: each token's name, symbol and decimals,
read from the token once (`ChainRegistry.metadata`). A token's decimals have this one
home (`ChainRegistry.decimals`); only the chain's own coin has them fixed (`ETH`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..backends.chain.base import ADDRESS_KEYS, Chain, ChainConfig
from ..errors import NotFound, UpstreamError, ValidationError
from ..evm.abi import DECIMALS, NAME, SYMBOL, Function
from ..evm.multicall import multicall
from . import plugins
from .models import ZERO_ADDRESS

ChainSpec = str | Mapping[str, Any] | ChainConfig | Chain


class DestinationRefused(ValidationError):
    """An address value must not be sent to (the zero address, a contract of a chain):
    a 400 that names no request field; the operation that read the address names it."""


@dataclass(frozen=True)
class TokenMetadata:
    name: str
    symbol: str
    decimals: int


#: The chain's own coin, which pays for gas: its decimals are the protocol's, not read.
ETH = TokenMetadata("Ether", "ETH", 18)
#: The views a token answers its metadata with, in `TokenMetadata` order.
METADATA_VIEWS: tuple[Function, ...] = (NAME, SYMBOL, DECIMALS)
TOKENS_PER_CALL = 100  # tokens whose metadata one multicall reads


def metadata_calls(token: str) -> list[tuple[str, Function, tuple[object, ...]]]:
    """The multicall sub-calls that read `token`'s metadata (`ChainRegistry.remember`
    takes their answers)."""
    return [(token, view, ()) for view in METADATA_VIEWS]


class ChainRegistry:
    """`state_beside` is the store's file: a chain that runs in the process (the devnet)
    keeps its state beside it, in ``<store>.chain`` (chain 31337) or ``<store>.chain-<id>``."""

    def __init__(
        self,
        specs: Mapping[int, ChainSpec],
        primary: int | None = None,
        state_beside: str | None = None,
    ):
        self._specs = dict(specs)
        self._primary = primary
        self._state_beside = state_beside
        self._open: dict[int, Chain] = {}
        self._lock = threading.Lock()
        self._tokens: dict[int, dict[str, TokenMetadata]] = {}

    def ids(self) -> list[int]:
        return sorted(self._specs)

    @property
    def primary(self) -> int:
        """The chain of the `ethereum` payment rail: the configured primary chain, else
        the lowest configured chain id."""
        if self._primary is not None:
            return self.require(self._primary)
        if not self._specs:
            raise NotFound("No chain is configured")
        return min(self._specs)

    def require(self, chain_id: int) -> int:
        """`chain_id` if configured, else the 404 of an unsupported chain."""
        if chain_id not in self._specs:
            raise NotFound(f"Chain {chain_id} is not supported")
        return chain_id

    def get(self, chain_id: int) -> Chain:
        spec = self._specs.get(self.require(chain_id))
        if isinstance(spec, Chain):
            return spec
        with self._lock:
            chain = self._open.get(chain_id)
            if chain is None:
                assert spec is not None
                config = ChainConfig.parse(chain_id, spec)
                if self._state_beside and config.state_path is None:
                    suffix = ".chain" if chain_id == 31337 else f".chain-{chain_id}"
                    config = replace(config, state_path=self._state_beside + suffix)
                cls = plugins.checked_class("chain", config.url, Chain)
                chain = self._open[chain_id] = cls.from_config(config)
            return chain

    def check_destination(self, address: str, chain_ids: list[int] | None = None) -> None:
        """`DestinationRefused` when `address` is the zero address or one of the
        contracts of the chains (`chain_ids`, default every configured one): value sent
        there is lost."""
        if address == ZERO_ADDRESS:
            raise DestinationRefused("must not be the zero address")
        for chain_id in self.ids() if chain_ids is None else chain_ids:
            for name, contract in self.get(chain_id).addresses.items():
                if contract == address:
                    raise DestinationRefused(f"must not be a contract of chain {chain_id} ({name})")

    def known(self, chain_id: int) -> dict[str, TokenMetadata]:
        """The metadata read so far of a chain's tokens, by lowercase address (an
        ERC-20's metadata never changes: read once per chain)."""
        with self._lock:
            return self._tokens.setdefault(chain_id, {})

    def remember(
        self, chain_id: int, token: str, answers: Iterator[tuple[object, ...] | None]
    ) -> TokenMetadata | None:
        """Keep what a token answered to `metadata_calls` (taken from `answers`); None,
        and nothing kept, when it did not answer all of them."""
        name, symbol, decimals = (next(answers) for _ in METADATA_VIEWS)
        if name is None or symbol is None or decimals is None:
            return None
        found = TokenMetadata(str(name[0]), str(symbol[0]), int(str(decimals[0])))
        self.known(chain_id)[token] = found
        return found

    def metadata(self, chain_id: int, tokens: Sequence[str]) -> dict[str, TokenMetadata]:
        """The metadata of `tokens` (lowercase addresses) on a chain: those not read yet
        are read in one multicall per `TOKENS_PER_CALL`; a token that does not answer
        is left out (and asked again next time)."""
        known = self.known(chain_id)
        missing = [token for token in dict.fromkeys(tokens) if token not in known]
        for start in range(0, len(missing), TOKENS_PER_CALL):
            chunk = missing[start : start + TOKENS_PER_CALL]
            calls = [call for token in chunk for call in metadata_calls(token)]
            answers = iter(multicall(self.get(chain_id), calls))
            for token in chunk:
                self.remember(chain_id, token, answers)
        return {token: known[token] for token in tokens if token in known}

    def token(self, chain_id: int, token: str) -> TokenMetadata:
        """The metadata of a token of a chain, named by its key in the chain's addresses
        (``"USDC"``, ``"c0"``; 409 naming the setting when the chain has none) or by its
        address; ``"ETH"`` is the chain's own coin. 502 when the token does not answer."""
        if token == ETH.symbol:
            return ETH
        chain = self.get(chain_id)
        address = (chain.address(token) if token in ADDRESS_KEYS else token).lower()
        found = self.metadata(chain_id, [address]).get(address)
        if found is None:
            raise UpstreamError(f"token {token} on chain {chain_id} did not answer its metadata")
        return found

    def decimals(self, chain_id: int, token: str) -> int:
        """The decimals of a token of a chain (named as for `token`): their one home."""
        return self.token(chain_id, token).decimals

    def close(self) -> None:
        with self._lock:
            for chain in self._open.values():
                chain.close()
            self._open.clear()
