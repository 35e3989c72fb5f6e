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
from decimal import Decimal
from typing import Any, Self

from ...errors import Conflict, UpstreamError

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
#: distributor, periods are published but no root is posted on that chain; without USDT
#: or c0 (Sepolia has no USDT, and c0 has no public address), an operation that needs
#: one is refused with 409 naming the setting (`Chain.address`).
OPTIONAL_ADDRESS_KEYS = ("USDT", "c0", "multicall", "yield_distributor")
CANONICAL_MULTICALL3 = "0xca11bde05977b3631167028862be2a173976ca11"
#: How c0 is exchanged back into a stablecoin on a chain (`ChainConfig.exit_path`):
#: ``swap`` is our devnet facility's direct ``swap(c0, usdc, …)``; ``replace_asset_with_m``
#: is M0's ``replaceAssetWithM(usdc, c0, c0, …)``, through the M float c0 holds.
EXIT_PATHS = ("swap", "replace_asset_with_m")
#: Settings of a chain that its URL may carry as query parameters (``?rail=ethereum``).
URL_SETTINGS = ("rail", "exit_path", "c0_decimals")
_SETTINGS = (
    "url",
    "addresses",
    "tokens",
    "minter_key",
    "confirmations",
    "stuck_after_blocks",
    "max_fee_per_gas",
    *URL_SETTINGS,
)


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
    SQLite store); None keeps it in memory. `rail` is the fiat provider's payment rail
    for this chain and `exit_path` one of `EXIT_PATHS`; None leaves them to the chain's
    preset (`presets`) or the backend's default. `c0_decimals` is for a chain that deploys
    its own contracts (the devnet): the decimals its c0 gets (None: 18); every other
    chain's c0 answers its own. `stuck_after_blocks` is how many blocks a signed leg may
    wait unmined while the base fee is above its offer before it is replaced with higher
    fees (None: 3); `max_fee_per_gas` (gwei) caps every fee the service signs (None: no cap).
    """

    chain_id: int
    url: str
    addresses: Mapping[str, str] = field(default_factory=dict)
    tokens: Sequence[str] = ()
    minter_key: str | None = field(default=None, repr=False)
    state_path: str | None = None
    confirmations: int | None = None
    rail: str | None = None
    exit_path: str | None = None
    c0_decimals: int | None = None
    stuck_after_blocks: int | None = None
    max_fee_per_gas: Decimal | None = None

    def __post_init__(self) -> None:
        url, named = _split_settings(self.url)  # built directly, not by `parse`
        for key, value in named.items():
            if getattr(self, key) is None:  # a field given wins over the URL's
                object.__setattr__(self, key, value)
        object.__setattr__(self, "url", url)
        if self.exit_path is not None and self.exit_path not in EXIT_PATHS:
            raise ValueError(
                f"chain {self.chain_id}: exit_path must be one of {', '.join(EXIT_PATHS)},"
                f" got {self.exit_path!r}"
            )
        if self.rail is not None and not (isinstance(self.rail, str) and self.rail.strip()):
            raise ValueError(f"chain {self.chain_id}: rail must be a non-empty name")
        if self.c0_decimals is not None and type(self.c0_decimals) is not int:
            raise ValueError(
                f"chain {self.chain_id}: c0_decimals must be a whole number,"
                f" got {self.c0_decimals!r}"
            )

    @classmethod
    def parse(cls, chain_id: int, spec: str | Mapping[str, Any] | ChainConfig) -> ChainConfig:
        """From a URL (``rail``, ``exit_path`` and ``c0_decimals`` may ride in its query:
        ``https://rpc.example?rail=ethereum``, ``devnet://?c0_decimals=6``), or a mapping
        ``{"url": ..., "addresses": {...}, "tokens": [...]}`` (also ``minter_key``,
        ``confirmations``, ``rail``, ``exit_path`` and ``c0_decimals``, which win over the
        URL's)."""
        if isinstance(spec, ChainConfig):
            return spec
        if isinstance(spec, str):
            spec = {"url": spec}
        url, from_url = _split_settings(str(spec["url"]))
        addresses = {k: str(v).lower() for k, v in dict(spec.get("addresses", {})).items()}
        unknown = set(addresses) - set(ADDRESS_KEYS)
        if unknown:
            raise ValueError(f"unknown chain address keys: {', '.join(sorted(unknown))}")
        unknown = set(spec) - set(_SETTINGS)
        if unknown:
            raise ValueError(f"unknown chain settings: {', '.join(sorted(unknown))}")
        tokens = tuple(str(t).lower() for t in spec.get("tokens", ()))
        minter = spec.get("minter_key")
        confirmations = spec.get("confirmations")
        if confirmations is not None and (type(confirmations) is not int or confirmations < 0):
            raise ValueError(f"confirmations must be a whole number >= 0, got {confirmations!r}")
        stuck = spec.get("stuck_after_blocks")
        if stuck is not None and (type(stuck) is not int or stuck < 1):
            raise ValueError(f"stuck_after_blocks must be a whole number >= 1, got {stuck!r}")
        cap = spec.get("max_fee_per_gas")
        if cap is not None:
            cap = _gwei(cap)
        named = {**from_url, **{k: spec[k] for k in URL_SETTINGS if spec.get(k) is not None}}
        return cls(
            int(chain_id),
            url,
            addresses,
            tokens,
            minter and str(minter),
            confirmations=confirmations,
            stuck_after_blocks=stuck,
            max_fee_per_gas=cap,
            **named,
        )


def _gwei(value: object) -> Decimal:
    """A fee cap in gwei: a positive number (int, Decimal or decimal text, never a float)."""
    if isinstance(value, bool) or not isinstance(value, int | str | Decimal):
        raise ValueError(f"max_fee_per_gas must be a number of gwei, got {value!r}")
    try:
        gwei = Decimal(value)
    except ArithmeticError:
        raise ValueError(f"max_fee_per_gas must be a number of gwei, got {value!r}") from None
    if not gwei.is_finite() or gwei <= 0 or (gwei * 10**9) % 1:
        raise ValueError(f"max_fee_per_gas must be a positive number of gwei, got {value!r}")
    return gwei


def _split_settings(url: str) -> tuple[str, dict[str, Any]]:
    """`url` without the query parameters of `URL_SETTINGS`, and their values (the rest
    of the query, an RPC provider's own parameters, stays in the URL)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit

    parts = urlsplit(url)
    if not parts.query:
        return url, {}
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    named: dict[str, Any] = {k: v for k, v in pairs if k in URL_SETTINGS}
    text = named.get("c0_decimals")
    if text is not None:  # a number in the query's text
        named["c0_decimals"] = int(text) if text.isascii() and text.isdigit() else text
    if not named:
        return url, {}
    kept = urlencode([(k, v) for k, v in pairs if k not in URL_SETTINGS])
    # the query replaced in the text: urlunsplit would drop the "//" of "devnet://"
    head, _, fragment = url.partition("#")
    base = head.partition("?")[0] + (f"?{kept}" if kept else "")
    return base + (f"#{fragment}" if fragment else ""), named


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
    block_hash: str = ""  # 0x hex, lowercase; the block the log was read in


@dataclass(frozen=True)
class Block:
    """A canonical block as the node shows it now: its number, hash and base fee (None on
    a chain without EIP-1559)."""

    number: int
    hash: str
    base_fee: int | None


#: One position of an ``eth_getLogs`` topic filter: a topic, any of several, or anything.
Topic = str | Sequence[str] | None


class Chain(ABC):
    """A chain backend. Thread-safe: one instance serves every thread of a process."""

    chain_id: int
    addresses: Mapping[str, str]  # the keys of ADDRESS_KEYS (the optional ones if known)
    tokens: Sequence[str]  # ERC-20 addresses reported by balances, USDC/USDT/c0 first
    #: Blocks on top of a log's block before a deposit counts (`ChainConfig.confirmations`).
    confirmations: int = 12
    #: The fiat provider's payment rail for this chain (`ChainConfig.rail`); None: none.
    rail: str | None = None
    #: How c0 is exchanged back into a stablecoin here (one of `EXIT_PATHS`).
    exit_path: str = "swap"
    #: Blocks a leg may wait unmined, under the base fee, before it is re-priced.
    stuck_after_blocks: int = 3
    #: The highest fee per gas the service signs, in wei (`ChainConfig.max_fee_per_gas`).
    max_fee_per_gas: int | None = None
    #: Whether `calls_at` answers for an earlier block than the head (a node keeps its
    #: states; the in-process devnet keeps only the latest).
    keeps_history: bool = True

    def settings(self, config: ChainConfig) -> None:
        """Take the settings every backend shares from `config` (where it sets them)."""
        if config.confirmations is not None:
            self.confirmations = config.confirmations
        if config.stuck_after_blocks is not None:
            self.stuck_after_blocks = config.stuck_after_blocks
        if config.max_fee_per_gas is not None:
            self.max_fee_per_gas = int(config.max_fee_per_gas * 10**9)

    def address(self, key: str) -> str:
        """The address of `key` (of `ADDRESS_KEYS`) on this chain; 409 naming the
        setting when the chain has none (c0 has no public address, Sepolia no USDT)."""
        found = self.addresses.get(key)
        if found is None:
            setting = f"chains.{self.chain_id}.addresses.{key}"
            raise Conflict(
                f"chain {self.chain_id} has no {key} address: set {setting}"
                f' ([chains.{self.chain_id}.addresses] {key} = "0x…")',
                {"setting": setting},
            )
        return found

    @classmethod
    @abstractmethod
    def from_config(cls, config: ChainConfig) -> Self:
        """Connect to (or start) the chain that `config` names."""

    @abstractmethod
    def call(self, to: str, data: bytes) -> bytes:
        """``eth_call`` at the latest block; `Reverted` if it reverts."""

    @abstractmethod
    def calls_at(self, calls: Sequence[tuple[str, bytes]], block: int) -> list[bytes]:
        """``eth_call`` of each ``(to, data)`` against the state after block `block`, in
        the order asked, in as few requests as the transport allows (JSON-RPC batch
        requests on real nodes): how reconciliation reads every balance at one height.
        `Reverted` if one reverts; `UpstreamError` for a block above the head, and, on a
        chain that keeps no history (`keeps_history` False), for any block but the head."""

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
    def blocks(self, numbers: Sequence[int]) -> list[Block | None]:
        """The canonical blocks at `numbers`, in the order asked (None above the head), in
        one request (a JSON-RPC batch on real nodes): what the reorg check compares the
        block hashes it kept with."""

    @abstractmethod
    def send_raw_transaction(self, raw: bytes) -> str:
        """Broadcast a signed transaction; return its hash (0x + 64 lowercase hex)."""

    def send_raw_transactions(self, raws: Sequence[bytes]) -> list[str | UpstreamError]:
        """Broadcast several signed transactions in this order (a payout run's legs);
        for each, its hash or the `UpstreamError` the node answered for it alone. A
        failure of the whole (nothing reached the node, the answer was cut) is raised.
        Optional: by default one `send_raw_transaction` after another (each failure its
        own); the JSON-RPC backend sends them in batch requests."""
        sent: list[str | UpstreamError] = []
        for raw in raws:
            try:
                sent.append(self.send_raw_transaction(raw))
            except UpstreamError as error:
                sent.append(error)
        return sent

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

    def offered_fees(self) -> dict[str, int]:
        """The fees the service signs with: `fee_fields`, no field above
        `max_fee_per_gas` (a leg offered less than the base fee waits, "fee above cap")."""
        fees = self.fee_fields()
        if self.max_fee_per_gas is None:
            return fees
        return {name: min(value, self.max_fee_per_gas) for name, value in fees.items()}

    @abstractmethod
    def estimate_gas(self, transaction: Mapping[str, Any]) -> int:
        """``eth_estimateGas``; `Reverted` if the transaction would revert."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release connections or stop an in-process chain."""
