"""The configured chains, opened lazily on first use and shared by every thread."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from . import _plugins
from .backends.chain.base import Chain, ChainConfig
from .errors import NotFound

ChainSpec = str | Mapping[str, Any] | ChainConfig | Chain


class ChainRegistry:
    def __init__(self, specs: Mapping[int, ChainSpec]):
        self._specs = dict(specs)
        self._open: dict[int, Chain] = {}
        self._lock = threading.Lock()

    def ids(self) -> list[int]:
        return sorted(self._specs)

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
                cls = _plugins.checked_class("chain", config.url, Chain)
                chain = self._open[chain_id] = cls.from_config(config)
            return chain

    def close(self) -> None:
        with self._lock:
            for chain in self._open.values():
                chain.close()
            self._open.clear()
