"""``devnet://``: an in-process EVM (eth-tester on py-evm) with our contracts deployed.

Each `DevnetChain` is an independent chain that lives in memory and dies with the object.
At start it deploys the contracts of ``treasury/contracts`` from a pre-funded account
(the deployer), makes the swap facility the c0 minter and seeds it with stablecoin
reserves. `faucet` mints tokens or sends ETH to any address.

Three fixes over a stock eth-tester (see DESIGN §4): the chain id is the configured one
(31337 by default) both in py-evm, where ``block.chainid`` reads it, and in the
provider's ``eth_chainId``; transactions are found through py-evm's hash index instead of
a scan of every block; raw transactions signed for another chain id are refused.

eth-tester is not thread-safe: every access, including through `web3`, holds `lock`
(an ``RLock``). Hold it yourself to make several `web3` requests atomic, e.g. reading a
nonce and sending.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, Self

from eth_tester import EthereumTester, PyEVMBackend
from eth_tester.backends.pyevm.serializers import (
    serialize_transaction,
    serialize_transaction_receipt,
)
from eth_tester.exceptions import TransactionFailed, TransactionNotFound, ValidationError
from eth_utils.exceptions import ValidationError as EvmValidationError
from web3 import EthereumTesterProvider, Web3
from web3.exceptions import ContractLogicError
from web3.providers.eth_tester.defaults import API_ENDPOINTS

from ...errors import UpstreamError
from ...evm.abi import call_fields, calldata, check_hash, revert_reason
from ._deploy import deploy_contracts, fund, post_yield_root
from .base import Chain, ChainConfig, Receipt, Reverted

__all__ = ["DevnetChain"]

_TIP = 10**9
_TESTER_NAMES = {  # eth-tester's snake_case for the camelCase fields
    "gasPrice": "gas_price",
    "maxFeePerGas": "max_fee_per_gas",
    "maxPriorityFeePerGas": "max_priority_fee_per_gas",
}


class DevnetChain(Chain):
    """An in-process chain (chain id from the config, 31337 by default) with our contracts."""

    def __init__(self, chain_id: int = 31337, tokens: Sequence[str] = ()) -> None:
        self.chain_id = chain_id
        self.lock = threading.RLock()
        self._tester = EthereumTester(backend=_Backend(chain_id))
        endpoints = {namespace: dict(methods) for namespace, methods in API_ENDPOINTS.items()}
        endpoints["eth"]["chainId"] = lambda tester, params: tester.backend.chain.chain_id
        self._web3 = Web3(_LockedProvider(self.lock, self._tester, endpoints))
        accounts = [a.lower() for a in self._tester.get_accounts()]
        # eth-tester charges gas for eth_call, so calls come from a funded account that
        # holds no role (a zero-balance sender cannot afford the block gas limit).
        self.deployer, self._caller = accounts[0], accounts[-1]
        with self._errors():
            self.addresses = deploy_contracts(self._web3, self.deployer)
        core = [self.addresses[k] for k in ("USDC", "USDT", "c0")]
        self.tokens = core + [t.lower() for t in tokens if t.lower() not in core]

    @classmethod
    def from_config(cls, config: ChainConfig) -> Self:
        if config.addresses:
            raise ValueError("devnet:// deploys its own contracts; do not configure addresses")
        return cls(config.chain_id, config.tokens)

    @property
    def web3(self) -> Web3:
        """A `Web3` on this chain; each request holds `lock`."""
        return self._web3

    # -- the Chain interface --------------------------------------------------------

    def call(self, to: str, data: bytes) -> bytes:
        tx = {"from": self._caller, "to": to.lower(), "data": "0x" + data.hex()}
        with self._errors():
            result: str = self._tester.call(tx, "latest")
        return bytes.fromhex(result.removeprefix("0x"))

    def receipts(self, hashes: Sequence[str]) -> list[Receipt | None]:
        with self._errors():
            return [self._receipt(check_hash(h)) for h in hashes]

    def send_raw_transaction(self, raw: bytes) -> str:
        with self._errors():
            tx_hash: str = self._tester.send_raw_transaction("0x" + bytes(raw).hex())
        return tx_hash.lower()

    def pending_nonce(self, address: str) -> int:
        with self._errors():
            return int(self._tester.get_nonce(address.lower(), "pending"))

    def mined_nonce(self, address: str) -> int:
        with self._errors():
            return int(self._tester.get_nonce(address.lower(), "latest"))

    def fee_fields(self) -> dict[str, int]:
        with self._errors():
            base = int(self._tester.get_block_by_number("pending")["base_fee_per_gas"])
        return {"maxFeePerGas": 2 * base + _TIP, "maxPriorityFeePerGas": _TIP}

    def estimate_gas(self, transaction: Mapping[str, Any]) -> int:
        fields = call_fields(transaction)
        tx = {"from": self._caller, **{_TESTER_NAMES.get(k, k): v for k, v in fields.items()}}
        with self._errors():
            return int(self._tester.estimate_gas(tx, "latest"))

    @property
    def can_mint(self) -> bool:
        return True

    def faucet(self, address: str, symbol: str, amount: str | int | Decimal) -> str:
        with self._errors():
            return fund(self._web3, self.deployer, self.addresses, address, symbol, amount)

    def post_yield_root(self, period_id: int, root: str, total: int) -> str | None:
        with self._errors():
            return post_yield_root(
                self._web3, self.deployer, self.addresses, period_id, root, total
            )

    # -- devnet only ----------------------------------------------------------------

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
            "gas": 100_000,
        }
        with self._errors():
            tx_hash = self._tester.send_transaction(tx)
            status = self._tester.get_transaction_receipt(tx_hash)["status"]
        if status != 1:
            raise Reverted(f"setting the earner rate reverted ({tx_hash})")

    def close(self) -> None:
        """Nothing to release: the chain is garbage-collected with this object."""

    # -- internals --------------------------------------------------------------------

    def _receipt(self, tx_hash: str) -> Receipt | None:
        try:
            r = self._tester.get_transaction_receipt(tx_hash)
        except TransactionNotFound:
            return None
        if r["block_number"] is None:  # still in the pending block
            return None
        root = r.get("state_root")
        return Receipt(
            transaction_hash=r["transaction_hash"].lower(),
            transaction_index=int(r["transaction_index"]),
            block_hash=r["block_hash"].lower(),
            block_number=int(r["block_number"]),
            sender=r["from"].lower(),
            to=r["to"].lower() if r["to"] else None,
            contract_address=(r["contract_address"] or "").lower() or None,
            status=int(r["status"]),
            type=int(r["type"], 16) if isinstance(r["type"], str) else int(r["type"]),
            root="0x" + root.hex() if isinstance(root, bytes) and len(root) == 32 else None,
        )

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Hold the lock; turn reverts into `Reverted` and node refusals into `UpstreamError`."""
        with self.lock:
            try:
                yield
            except (TransactionFailed, ContractLogicError) as e:
                reason = revert_reason(getattr(e, "data", None) or e)
                raise Reverted(f"Execution reverted: {reason}" if reason else None) from e
            except (ValidationError, EvmValidationError) as e:
                raise UpstreamError(f"devnet refused the request: {_as_nodes_say(e)}") from e


def _as_nodes_say(error: Exception) -> str:
    """py-evm's refusal, with the words JSON-RPC nodes use where they differ (an old nonce
    is "nonce too low", which `broadcast` checks against the receipt)."""
    text = str(error)
    found = re.search(r"Invalid transaction nonce: Expected (\d+), but got (\d+)", text)
    if found and int(found.group(2)) < int(found.group(1)):
        return f"nonce too low ({text})"
    return text


class _Backend(PyEVMBackend):  # type: ignore[misc]
    """py-evm backend with our chain id, hash-indexed look-ups and a chain-id check."""

    def __init__(self, chain_id: int) -> None:
        self._chain_id = chain_id
        super().__init__()

    def reset_to_genesis(self, *args: Any, **kwargs: Any) -> None:
        super().reset_to_genesis(*args, **kwargs)
        # eth-tester hard-codes the id on a chain class it defines per call: subclass it.
        base = type(self.chain)
        self.chain.__class__ = type(base.__name__, (base,), {"chain_id": self._chain_id})

    def send_raw_transaction(self, raw_transaction: bytes) -> bytes:
        if raw_transaction[:1] != b"\x03":  # blob transactions are decoded by eth-tester
            builder = self.chain.get_vm().get_transaction_builder()
            chain_id = builder.decode(raw_transaction).chain_id
            if chain_id is not None and chain_id != self._chain_id:
                raise ValidationError(f"invalid chain id {chain_id}, expected {self._chain_id}")
        tx_hash: bytes = super().send_raw_transaction(raw_transaction)
        return tx_hash

    def get_transaction_by_hash(self, transaction_hash: bytes) -> Any:
        block, transaction, index, pending = self._find(transaction_hash)
        return serialize_transaction(block, transaction, index, pending)

    def get_transaction_receipt(self, transaction_hash: bytes) -> Any:
        block, transaction, index, pending = self._find(transaction_hash)
        receipts = block.get_receipts(self.chain.chaindb)
        vm = self.chain.get_vm()
        return serialize_transaction_receipt(block, receipts, transaction, index, pending, vm)

    def _find(self, transaction_hash: bytes) -> tuple[Any, Any, int, bool]:
        pending = self.chain.get_block()
        for index, transaction in enumerate(pending.transactions):
            if transaction.hash == transaction_hash:
                return pending, transaction, index, True
        try:
            number, index = self.chain.chaindb.get_transaction_index(transaction_hash)
        except Exception as e:  # py-evm's TransactionNotFound
            raise TransactionNotFound(f"unknown transaction 0x{transaction_hash.hex()}") from e
        block = self.chain.get_canonical_block_by_number(number)
        return block, block.transactions[index], index, False


class _LockedProvider(EthereumTesterProvider):
    """Serialises every request on the chain's lock (eth-tester is not thread-safe)."""

    def __init__(
        self, lock: threading.RLock, tester: EthereumTester, endpoints: dict[str, Any]
    ) -> None:
        super().__init__(tester, endpoints)
        self._lock = lock

    def make_request(self, method: Any, params: Any) -> Any:
        with self._lock:
            return super().make_request(method, params)
