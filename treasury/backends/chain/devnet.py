"""``devnet://``: an in-process EVM (revm, through `pyrevm`) with our contracts deployed.

A `DevnetChain` is a chain of its own inside the process: one transaction a block, mined
on arrival (`_node.Node`). Its blocks are kept in `state_path` (a SQLite file, by default
``<store>.chain`` beside a SQLite store), committed with each block, so a restart or a
kill -9 keeps balances, contracts, nonces and receipts; without a path it lives in memory
and dies with the object. A fresh chain deploys the contracts of ``treasury/contracts``
from its deployer (anvil's first dev account), makes the swap facility the c0 minter and
seeds it with stablecoin reserves. Its c0 has 18 decimals unless the URL's query or the
chain's table says ``c0_decimals`` (``devnet://?c0_decimals=6``, as M0's extensions); the
chain's file keeps the decimals it was deployed with. It is a test chain (`minting.MintingChain`): `faucet` mints
tokens or sends ETH to any address, and its deployer's key (`minter_key`) operates the
yield distributor. `web3`, `earner_rate_bps` and `set_earner_rate_bps` are the devnet's
own, outside the `Chain` interface. Deposits count at once (`confirmations` 0: a block
is mined per transaction and never reorganised).

The chain id is the configured one (31337 by default) in ``block.chainid`` and
``eth_chainId``; raw transactions signed for another chain id are refused; receipts are
found by hash (no log scans); node errors are normalised here as on a JSON-RPC node
(DESIGN §4). Every access, including through `web3`, holds `lock` (an ``RLock``); hold it
yourself to make several `web3` requests atomic, e.g. reading a nonce and sending.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, Self, cast
from urllib.parse import unquote, urlsplit

from web3 import Web3
from web3.exceptions import ContractLogicError, Web3RPCError
from web3.providers.base import BaseProvider
from web3.types import RPCEndpoint, RPCResponse

from ...errors import UpstreamError
from ...evm.abi import call_fields, calldata, check_hash, revert_reason
from ._deploy import check_c0_decimals, contract_addresses, decimals, deploy_contracts, fund
from ._ledger import Ledger
from ._node import Node, RpcError
from .base import Block, Chain, ChainConfig, Log, Receipt, Reverted, Topic
from .presets import RAILS
from .rpc import _block, _log, _logs_query, _raise, _receipt

__all__ = ["DevnetChain"]


class DevnetChain(Chain):
    """An in-process chain (chain id from the config, 31337 by default) with our contracts,
    kept in `state_path` when given.

    A fresh chain deploys c0 with `c0_decimals` (default `_deploy.DECIMALS`' 18); a chain
    replayed from its file keeps the decimals it was deployed with (its deployment is in
    the file), and a `c0_decimals` that differs from them is a `ValueError`. `c0_decimals`
    holds them as c0 answers.
    """

    confirmations = 0
    keeps_history = False  # one EVM state: `calls_at` answers at the head only

    def __init__(
        self,
        chain_id: int = 31337,
        tokens: Sequence[str] = (),
        state_path: str | None = None,
        confirmations: int | None = None,
        rail: str | None = None,
        c0_decimals: int | None = None,
    ) -> None:
        self.chain_id = chain_id
        self.rail = rail or RAILS.get(chain_id)
        if confirmations is not None:
            self.confirmations = confirmations
        self.state_path = state_path
        self.lock = threading.RLock()
        ledger = Ledger(state_path, chain_id)
        try:
            self._node = Node(chain_id, ledger)
        except Exception:
            ledger.close()
            raise
        self._web3 = Web3(_NodeProvider(self))
        self.deployer = next(iter(self._node.accounts))
        try:
            if c0_decimals is not None:
                check_c0_decimals(c0_decimals)
            if self._node.head.number > 0:  # a replayed chain: deployed first, all at once
                self.addresses = contract_addresses(self.deployer, 0)
            else:
                with ledger.atomic():
                    self.addresses = deploy_contracts(self._web3, self.deployer, c0_decimals)
            self.c0_decimals = decimals(self._web3, self.addresses["c0"])
            if c0_decimals not in (None, self.c0_decimals):
                raise ValueError(
                    f"the devnet in {state_path} has a c0 of {self.c0_decimals} decimals,"
                    f" not {c0_decimals}: a chain keeps the decimals it was deployed with"
                )
        except Exception:
            ledger.close()
            raise
        core = [self.addresses[k] for k in ("USDC", "USDT", "c0")]
        self.tokens = core + [t.lower() for t in tokens if t.lower() not in core]

    @classmethod
    def from_config(cls, config: ChainConfig) -> Self:
        if config.addresses:
            raise ValueError("devnet:// deploys its own contracts; do not configure addresses")
        if config.exit_path not in (None, "swap"):
            raise ValueError("devnet:// exchanges c0 through its facility's swap: exit_path = swap")
        url = urlsplit(config.url)
        if url.query:  # `ChainConfig.parse` took the settings it knows out of the URL
            raise ValueError(f"unknown devnet:// URL settings: {url.query}")
        path = unquote(url.path).removeprefix("/") or config.state_path
        chain = cls(
            config.chain_id,
            config.tokens,
            path or None,
            config.confirmations,
            rail=config.rail,
            c0_decimals=config.c0_decimals,
        )
        chain.settings(config)
        return chain

    # -- the Chain interface --------------------------------------------------------

    def call(self, to: str, data: bytes) -> bytes:
        result = self._rpc("eth_call", {"to": to.lower(), "data": "0x" + data.hex()})
        return bytes.fromhex(str(result).removeprefix("0x"))

    def calls_at(self, calls: Sequence[tuple[str, bytes]], block: int) -> list[bytes]:
        with self.lock:  # the head cannot move between the check and the calls
            head = self.head()
            if block != head:
                raise UpstreamError(
                    f"the devnet keeps only its latest state: it answers at block {head},"
                    f" not {block}"
                )
            return [self.call(to, data) for to, data in calls]

    def receipts(self, hashes: Sequence[str]) -> list[Receipt | None]:
        checked = [check_hash(h) for h in hashes]
        with self.lock:
            found = [self._node.request("eth_getTransactionReceipt", [h]) for h in checked]
        return [_receipt(r) if r else None for r in found]

    def logs(
        self, first: int, last: int, contracts: Sequence[str], topics: Sequence[Topic]
    ) -> list[Log]:
        query = _logs_query(first, last, contracts, topics)
        return [_log(found) for found in self._rpc("eth_getLogs", query)]

    def head(self) -> int:
        return int(self._rpc("eth_blockNumber"), 16)

    def blocks(self, numbers: Sequence[int]) -> list[Block | None]:
        with self.lock:
            found = [self._node.request("eth_getBlockByNumber", [hex(n), False]) for n in numbers]
        return [_block(answer) if answer else None for answer in found]

    def send_raw_transaction(self, raw: bytes) -> str:
        return str(self._rpc("eth_sendRawTransaction", "0x" + bytes(raw).hex())).lower()

    def pending_nonce(self, address: str) -> int:
        return int(self._rpc("eth_getTransactionCount", address.lower(), "pending"), 16)

    def mined_nonce(self, address: str) -> int:
        return int(self._rpc("eth_getTransactionCount", address.lower(), "latest"), 16)

    def fee_fields(self) -> dict[str, int]:
        with self.lock:
            base = self._node.request("eth_feeHistory", [1, "latest"])["baseFeePerGas"][-1]
            tip = self._node.request("eth_maxPriorityFeePerGas", [])
        return {
            "maxFeePerGas": 2 * int(base, 16) + int(tip, 16),
            "maxPriorityFeePerGas": int(tip, 16),
        }

    def estimate_gas(self, transaction: Mapping[str, Any]) -> int:
        return int(self._rpc("eth_estimateGas", call_fields(transaction)), 16)

    # -- the test chain (minting.MintingChain) ---------------------------------------------

    @property
    def minter_key(self) -> str:
        """The deployer's key (anvil's first dev account): it owns our contracts."""
        return self._node.accounts[self.deployer]

    def faucet(self, address: str, symbol: str, amount: str | int | Decimal) -> str:
        with self._errors():
            return fund(self._web3, self.deployer, self.addresses, address, symbol, amount)

    # -- devnet only ----------------------------------------------------------------

    @property
    def web3(self) -> Web3:
        """A `Web3` on this chain; each request holds `lock`."""
        return self._web3

    def earner_rate_bps(self) -> int:
        """The live ``earnerRate()`` of the earner rate source, in basis points."""
        data = self.call(self.addresses["earner_rate_source"], calldata("earnerRate()"))
        return int.from_bytes(data[:32], "big")

    def set_earner_rate_bps(self, rate: int) -> None:
        """Set the earner rate (basis points, a uint32)."""
        if not 0 <= rate < 2**32:
            raise ValueError(f"earner rate must be a uint32, got {rate}")
        tx = {
            "from": self.deployer,
            "to": self.addresses["earner_rate_source"],
            "data": "0x" + calldata("setEarnerRate(uint32)", rate).hex(),
            "gas": hex(100_000),
        }
        with self.lock:
            tx_hash = self._rpc("eth_sendTransaction", tx)
            status = self._node.request("eth_getTransactionReceipt", [tx_hash])["status"]
        if status != "0x1":
            raise Reverted(f"setting the earner rate reverted ({tx_hash})")

    def close(self) -> None:
        """Close the chain's file (its state stays there for the next start)."""
        with self.lock:
            self._node.ledger.close()

    # -- internals --------------------------------------------------------------------

    def _rpc(self, method: str, *params: Any) -> Any:
        """One request to the node; its errors as a JSON-RPC node's are (`rpc._raise`)."""
        with self.lock:
            try:
                return self._node.request(method, list(params))
            except RpcError as e:
                if e.code == 3:
                    _raise({"error": e.answer()}, method)
                raise UpstreamError(f"devnet refused the request: {e.message}") from None

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Hold the lock; web3's errors from the node become `Reverted` / `UpstreamError`."""
        with self.lock:
            try:
                yield
            except ContractLogicError as e:
                reason = revert_reason(e.data or str(e))
                raise Reverted(f"Execution reverted: {reason}" if reason else None) from e
            except Web3RPCError as e:
                raise UpstreamError(f"devnet refused the request: {e.message}") from e


class _NodeProvider(BaseProvider):
    """web3's provider for the node: requests hold the chain's lock; no I/O."""

    def __init__(self, chain: DevnetChain) -> None:
        super().__init__()
        self._chain = chain

    def make_request(self, method: RPCEndpoint, params: Any) -> RPCResponse:
        with self._chain.lock:
            try:
                result = self._chain._node.request(method, list(params))
            except RpcError as e:
                answer: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "error": e.answer()}
                return cast(RPCResponse, answer)
        return {"jsonrpc": "2.0", "id": 0, "result": result}

    def is_connected(self, show_traceback: bool = False) -> bool:
        return True
