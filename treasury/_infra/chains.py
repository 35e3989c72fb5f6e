"""The configured chains, opened lazily on first use and shared by every thread, with
what is immutable about them cached per chain (token metadata)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..backends.chain.base import Chain, ChainConfig
from ..errors import NotFound, ValidationError
from . import plugins
from .models import ZERO_ADDRESS

ChainSpec = str | Mapping[str, Any] | ChainConfig | Chain


@dataclass(frozen=True)
class TokenMetadata:
    name: str
    symbol: str
    decimals: int


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

    def check_destination(
        self, address: str, field: str, chain_ids: list[int] | None = None
    ) -> None:
        """400 (at body `field`) when `address` is the zero address or one of the
        contracts of the chains (`chain_ids`, default every configured one): value sent
        there is lost."""
        if address == ZERO_ADDRESS:
            raise ValidationError.field("body", field, "must not be the zero address")
        for chain_id in self.ids() if chain_ids is None else chain_ids:
            for name, contract in self.get(chain_id).addresses.items():
                if contract == address:
                    raise ValidationError.field(
                        "body", field, f"must not be a contract of chain {chain_id} ({name})"
                    )

    def token_metadata(self, chain_id: int) -> dict[str, TokenMetadata]:
        """Name, symbol and decimals of the tokens seen on a chain, by lowercase address
        (an ERC-20's metadata never changes: read once per chain)."""
        with self._lock:
            return self._tokens.setdefault(chain_id, {})

    def close(self) -> None:
        with self._lock:
            for chain in self._open.values():
                chain.close()
            self._open.clear()
