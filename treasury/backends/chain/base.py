"""The chain interface: the few JSON-RPC primitives the library builds everything on.

Balances (Multicall3 ``aggregate3``), allowances, prepare steps, earner rates and the
indexer are written once in the core on top of `call`, `receipts`, `send_raw_transaction`,
`pending_nonce`, `mined_nonce` and `fee_fields`. A backend translates its transport's failures into
`UpstreamError` (502) and reverted calls into `Reverted` at this boundary.
`treasury.testing.chain.ChainSuite` is the conformance suite every backend runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Self

from ...errors import NotFound, UpstreamError

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
    it the chain can mint, and the test helpers (the faucet) exist. Never on a real chain.
    `state_path` is where a chain that runs inside the process keeps its state (the
    devnet's blocks; `Treasury.open` sets it beside a SQLite store); None keeps it in memory.
    """

    chain_id: int
    url: str
    addresses: Mapping[str, str] = field(default_factory=dict)
    tokens: Sequence[str] = ()
    minter_key: str | None = field(default=None, repr=False)
    state_path: str | None = None

    @classmethod
    def parse(cls, chain_id: int, spec: str | Mapping[str, Any] | ChainConfig) -> ChainConfig:
        """From a URL, or a mapping ``{"url": ..., "addresses": {...}, "tokens": [...]}``."""
        if isinstance(spec, ChainConfig):
            return spec
        if isinstance(spec, str):
            return cls(chain_id, spec)
        addresses = {k: str(v).lower() for k, v in dict(spec.get("addresses", {})).items()}
        unknown = set(addresses) - set(ADDRESS_KEYS)
        if unknown:
            raise ValueError(f"unknown chain address keys: {', '.join(sorted(unknown))}")
        unknown = set(spec) - {"url", "addresses", "tokens", "minter_key"}
        if unknown:
            raise ValueError(f"unknown chain settings: {', '.join(sorted(unknown))}")
        tokens = tuple(str(t).lower() for t in spec.get("tokens", ()))
        minter = spec.get("minter_key")
        return cls(int(chain_id), str(spec["url"]), addresses, tokens, minter and str(minter))


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

    @property
    @abstractmethod
    def web3(self) -> Any:
        """A `web3.Web3` bound to this chain, for signing and sending outside the library."""

    def head(self) -> int:
        """``eth_blockNumber``: the number of the latest block."""
        return int(self.web3.eth.block_number)

    def logs(
        self, first: int, last: int, contracts: Sequence[str], topics: Sequence[Topic]
    ) -> list[Log]:
        """``eth_getLogs`` over blocks `first`..`last` (inclusive) of `contracts`,
        filtered by `topics`: one request, in chain order. Backends that speak JSON-RPC
        themselves override it; this default goes through `web3`."""
        found = self.web3.eth.get_logs(
            {
                "fromBlock": first,
                "toBlock": last,
                "address": [self.web3.to_checksum_address(c) for c in contracts],
                "topics": [t if t is None or isinstance(t, str) else list(t) for t in topics],
            }
        )
        return [
            Log(
                contract=str(log["address"]).lower(),
                topics=tuple("0x" + bytes(t).hex().removeprefix("0x") for t in log["topics"]),
                data=bytes(log["data"]),
                block_number=int(log["blockNumber"]),
                transaction_hash="0x" + bytes(log["transactionHash"]).hex().removeprefix("0x"),
                log_index=int(log["logIndex"]),
            )
            for log in found
        ]

    @property
    def can_mint(self) -> bool:
        """Whether `faucet` works here (a local chain whose test contracts we own)."""
        return False

    def faucet(self, address: str, symbol: str, amount: str | int | Decimal) -> str:
        """Mint `amount` whole units of ``USDC``, ``USDT`` or ``c0`` to `address`, or send
        it ``ETH``; return the mined transaction's hash. `NotFound` on a chain that cannot
        mint; `ValueError` for a bad symbol or amount."""
        raise NotFound(f"Chain {self.chain_id} has no test helpers")

    def post_yield_root(self, period_id: int, root: str, total: int) -> str | None:
        """Where the chain has a yield distributor and we hold its operator key (a local
        chain whose test contracts we own): give the distributor `total` raw c0 and post
        `root` for `period_id`; the mined posting's hash. None elsewhere."""
        return None

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release connections or stop an in-process chain."""
