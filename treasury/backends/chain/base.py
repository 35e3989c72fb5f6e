"""The chain interface: the few JSON-RPC primitives the library builds everything on.

Balances (Multicall3 ``aggregate3``), allowances, prepare steps, earner rates, the
indexer and the posting of yield roots are written once in the core on top of `call`,
`receipts`, `logs`, `head`, `send_raw_transaction`, `pending_nonce`, `mined_nonce`,
`fee_fields` and `estimate_gas`. The interface knows nothing of minting or yield: a local
test chain adds the `minting.MintingChain` interface. A backend translates its transport's
failures into `UpstreamError` (502) and reverted calls into `Reverted` at this boundary.
`treasury.testing.chain.ChainSuite` is the conformance suite every backend runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from ...errors import UpstreamError

#: Keys of `ChainConfig.addresses` (values: lowercase 0x addresses on that chain).
ADDRESS_KEYS = (
    "USDC",
    "USDT",
    "c0",
    "swap_facility",
    "earner_rate_source",
    "multicall",
    "yield_distributor",
)
#: Keys a chain may go without: Multicall3 has a canonical address; without a yield
#: distributor, periods are published but no root is posted on that chain.
OPTIONAL_ADDRESS_KEYS = ("multicall", "yield_distributor")
CANONICAL_MULTICALL3 = "0xca11bde05977b3631167028862be2a173976ca11"


class Reverted(UpstreamError):
    """An eth_call or transaction reverted (502); `.message` carries the reason when known."""

    default_message = "Execution reverted"


@dataclass(frozen=True)
class ChainConfig:
    """One chain: its id, its backend URL, and the addresses of our contracts on it.

    `tokens` lists extra ERC-20 addresses whose balances are reported besides USDC,
    USDT and c0. `minter_key` is the private key of the account that owns our test
    contracts on a local chain (anvil's first dev account for `treasury devnet`): with
    it the chain is a test chain (`minting.MintingChain`: the test helpers exist, and yield roots
    are posted to the distributor that key operates). Never on a real chain.
    `confirmations` is how many blocks must be on top of a log's block before a deposit
    counts; None leaves it to the backend (`Chain.confirmations`: 12 on a node, 0 on a
    test chain, which mines on demand). `state_path` is where a chain that runs inside
    the process keeps its state (the devnet's blocks; `Treasury.open` sets it beside a
    SQLite store); None keeps it in memory. `c0_decimals` is for a chain that deploys
    its own contracts (the devnet): the decimals its c0 gets (None: 18); every other
    chain's c0 answers its own.
    """

    chain_id: int
    url: str
    addresses: Mapping[str, str] = field(default_factory=dict)
    tokens: Sequence[str] = ()
    minter_key: str | None = field(default=None, repr=False)
    state_path: str | None = None
    confirmations: int | None = None
    c0_decimals: int | None = None

    @classmethod
    def parse(cls, chain_id: int, spec: str | Mapping[str, Any] | ChainConfig) -> ChainConfig:
        """From a URL, or a mapping ``{"url": ..., "addresses": {...}, "tokens": [...]}``
        (also ``minter_key``, ``confirmations`` and ``c0_decimals``)."""
        if isinstance(spec, ChainConfig):
            return spec
        if isinstance(spec, str):
            return cls(chain_id, spec)
        addresses = {k: str(v).lower() for k, v in dict(spec.get("addresses", {})).items()}
        unknown = set(addresses) - set(ADDRESS_KEYS)
        if unknown:
            raise ValueError(f"unknown chain address keys: {', '.join(sorted(unknown))}")
        settings = {"url", "addresses", "tokens", "minter_key", "confirmations", "c0_decimals"}
        unknown = set(spec) - settings
        if unknown:
            raise ValueError(f"unknown chain settings: {', '.join(sorted(unknown))}")
        tokens = tuple(str(t).lower() for t in spec.get("tokens", ()))
        minter = spec.get("minter_key")
        confirmations = spec.get("confirmations")
        if confirmations is not None and (type(confirmations) is not int or confirmations < 0):
            raise ValueError(f"confirmations must be a whole number >= 0, got {confirmations!r}")
        c0_decimals = spec.get("c0_decimals")
        if c0_decimals is not None and type(c0_decimals) is not int:
            raise ValueError(f"c0_decimals must be a whole number, got {c0_decimals!r}")
        return cls(
            int(chain_id),
            str(spec["url"]),
            addresses,
            tokens,
            minter and str(minter),
            confirmations=confirmations,
            c0_decimals=c0_decimals,
        )


@dataclass(frozen=True)
class Receipt:
    """A mined transaction's receipt; `status` 1 is success, 0 reverted (EIP-658)."""

    transaction_hash: str
    transaction_index: int
    block_hash: str
    block_number: int
    sender: str
    to: str | None
    contract_address: str | None
    status: int
    type: int
    root: str | None = None


@dataclass(frozen=True)
class Log:
    """One event log: the `contract` that emitted it (lowercase), its topics (0x hex,
    lowercase), its data, and where it sits (block, transaction, index in the block)."""

    contract: str
    topics: tuple[str, ...]
    data: bytes
    block_number: int
    transaction_hash: str
    log_index: int


#: One position of an ``eth_getLogs`` topic filter: a topic, any of several, or anything.
Topic = str | Sequence[str] | None


class Chain(ABC):
    """A chain backend. Thread-safe: one instance serves every thread of a process."""

    chain_id: int
    addresses: Mapping[str, str]  # the keys of ADDRESS_KEYS (the optional ones if known)
    tokens: Sequence[str]  # ERC-20 addresses reported by balances, USDC/USDT/c0 first
    #: Blocks on top of a log's block before a deposit counts (`ChainConfig.confirmations`).
    confirmations: int = 12

    @classmethod
    @abstractmethod
    def from_config(cls, config: ChainConfig) -> Self:
        """Connect to (or start) the chain that `config` names."""

    @abstractmethod
    def call(self, to: str, data: bytes) -> bytes:
        """``eth_call`` at the latest block; `Reverted` if it reverts."""

    @abstractmethod
    def receipts(self, hashes: Sequence[str]) -> list[Receipt | None]:
        """Receipts in the order asked, None for transactions not mined (or unknown).

        Backends fetch many at once (JSON-RPC batch requests on real nodes).
        """

    @abstractmethod
    def logs(
        self, first: int, last: int, contracts: Sequence[str], topics: Sequence[Topic]
    ) -> list[Log]:
        """``eth_getLogs`` over blocks `first`..`last` (inclusive) of `contracts`,
        filtered by `topics`: one request, in chain order."""

    @abstractmethod
    def head(self) -> int:
        """``eth_blockNumber``: the number of the latest block."""

    @abstractmethod
    def send_raw_transaction(self, raw: bytes) -> str:
        """Broadcast a signed transaction; return its hash (0x + 64 lowercase hex)."""

    @abstractmethod
    def pending_nonce(self, address: str) -> int:
        """``eth_getTransactionCount(address, "pending")``."""

    @abstractmethod
    def mined_nonce(self, address: str) -> int:
        """``eth_getTransactionCount(address, "latest")``: how many of the address's
        transactions are mined. A leg whose nonce is below it is mined or replaced."""

    @abstractmethod
    def fee_fields(self) -> dict[str, int]:
        """Fee fields for a new transaction: EIP-1559 ``maxFeePerGas`` and
        ``maxPriorityFeePerGas``, or a legacy ``gasPrice``."""

    @abstractmethod
    def estimate_gas(self, transaction: Mapping[str, Any]) -> int:
        """``eth_estimateGas``; `Reverted` if the transaction would revert."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release connections or stop an in-process chain."""
