"""An in-process Ethereum node on revm (`pyrevm`): one transaction a block, mined on arrival.

`Node.request` answers the JSON-RPC methods that web3.py and the chain backend use, with
the shapes and error codes of a real node (anvil's words where nodes differ), so the
devnet's `web3` and its `Chain` methods share one path. revm executes; this module does
what a node adds around it: decoding and checking signed transactions (chain id, nonce,
fee cap, funds), charging gas, EIP-1559 base fees, blocks, receipts and logs.

Every block is appended to a `Ledger` before it is executed (a valid transaction's
outcome is determined by it); opening a node replays its ledger, so the chain survives
restarts (see `_ledger`). Not thread-safe: the
devnet holds its lock around every request.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from eth_account import Account
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak
from pyrevm import EVM, AccountInfo, BlockEnv, CfgEnv, Env

from ...evm.abi import revert_reason
from ._ledger import Ledger
from ._shapes import (
    EMPTY_BLOOM,
    GAS_LIMIT,
    ZERO,
    Block,
    RpcError,
    Tx,
    as_bytes,
    as_int,
    block_answer,
    block_number,
    decode,
    intrinsic_gas,
    log_answer,
    topic_matches,
    transaction_answer,
)

__all__ = ["DEV_KEYS", "Node", "RpcError"]

#: Private keys of the node's unlocked accounts (`eth_accounts`), each holding 10,000 ETH
#: at genesis. The first is anvil's first dev account: the devnet's deployer, so our
#: contracts get the addresses they get under `treasury devnet`.
DEV_KEYS = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    *("0x" + keccak(text=f"treasury devnet account {i}").hex() for i in range(1, 10)),
)
GENESIS_BALANCE = 10_000 * 10**18
INITIAL_BASE_FEE = 10**9
TIP = 10**9
_GENESIS_TIME = 1_700_000_000


class Node:
    """A chain with id `chain_id` whose blocks live in `ledger`."""

    def __init__(self, chain_id: int, ledger: Ledger) -> None:
        self.chain_id = chain_id
        self.ledger = ledger
        self.accounts = {Account.from_key(k).address.lower(): k for k in DEV_KEYS}
        self.evm = EVM(
            env=Env(cfg=CfgEnv(chain_id=chain_id)), gas_limit=GAS_LIMIT, spec_id="CANCUN"
        )
        for address in self.accounts:
            self.evm.set_balance(address, GENESIS_BALANCE)
        genesis = Block(
            0,
            "0x" + keccak(text=f"genesis {chain_id}").hex(),
            "0x" + "00" * 32,
            _GENESIS_TIME,
            INITIAL_BASE_FEE,
        )
        self.blocks = [genesis]
        self.txs: dict[str, Block] = {}
        self._set_env(genesis)
        for timestamp, sender, raw in ledger.blocks():
            self._mine(decode(raw, sender), timestamp, record=False)
        self._methods: dict[str, Callable[..., Any]] = {
            name.removeprefix("_rpc_"): getattr(self, name)
            for name in dir(self)
            if name.startswith("_rpc_")
        }

    @property
    def head(self) -> Block:
        return self.blocks[-1]

    def request(self, method: str, params: list[Any]) -> Any:
        """The result of one JSON-RPC call; `RpcError` for an error answer."""
        handler = self._methods.get(method)
        if handler is None:
            raise RpcError(-32601, f"the devnet does not support {method}")
        return handler(*params)

    # -- sending -------------------------------------------------------------------------

    def send_raw(self, raw: bytes) -> str:
        tx = decode(raw)
        if tx.hash in self.txs:
            raise RpcError(-32000, "already known")
        if tx.chain_id is not None and tx.chain_id != self.chain_id:
            raise RpcError(-32000, f"invalid chain id {tx.chain_id}, expected {self.chain_id}")
        expected = self.evm.basic(tx.sender).nonce
        if tx.nonce < expected:
            raise RpcError(-32003, f"nonce too low: next nonce {expected}, tx nonce {tx.nonce}")
        if tx.nonce > expected:  # no mempool: a gap would wait forever
            raise RpcError(-32000, f"nonce too high: next nonce {expected}, tx nonce {tx.nonce}")
        if tx.gas > GAS_LIMIT:
            raise RpcError(-32000, "exceeds block gas limit")
        if tx.gas < intrinsic_gas(tx):
            raise RpcError(-32000, "intrinsic gas too low")
        base_fee = self._next_base_fee()
        if tx.max_fee < base_fee:
            raise RpcError(-32000, "max fee per gas less than block base fee")
        if self.evm.get_balance(tx.sender) < tx.gas * tx.max_fee + tx.value:
            raise RpcError(-32003, "insufficient funds for gas * price + value")
        self._mine(tx, max(self.head.timestamp + 1, int(time.time())), record=True)
        return tx.hash

    def _mine(self, tx: Tx, timestamp: int, *, record: bool) -> None:
        parent = self.head
        number = parent.number + 1
        block = Block(number, "", parent.hash, timestamp, self._next_base_fee(), tx=tx)
        block.hash = (
            "0x"
            + keccak(bytes.fromhex(parent.hash[2:] + tx.hash[2:]) + number.to_bytes(8, "big")).hex()
        )
        if record:  # written ahead: once on disk, a replay mines it the same way
            self.ledger.append(number, timestamp, tx.sender, tx.raw)
        self._set_env(block)
        created: str | None = None
        status = 1
        try:
            if tx.to is None:
                created = self.evm.deploy(tx.sender, tx.data, tx.value, tx.gas).lower()
            else:
                self.evm.message_call(tx.sender, tx.to, tx.data, tx.value, tx.gas)
        except RuntimeError as e:
            status, created = 0, None
            gas_used, logs = _used_by(e, tx.gas), []
        result = self.evm.result
        if status == 1:
            assert result is not None
            gas_used, logs = result.gas_used, result.logs
        price = tx.price(block.base_fee)
        sender = self.evm.basic(tx.sender)  # pays for its gas; its nonce moves on
        paid: dict[str, Any] = {"balance": sender.balance - gas_used * price}  # not in the stub
        self.evm.insert_account_info(
            tx.sender,
            AccountInfo(**paid, nonce=tx.nonce + 1, code_hash=sender.code_hash, code=sender.code),
        )
        block.gas_used = gas_used
        block.receipt = {
            "transactionHash": tx.hash,
            "transactionIndex": "0x0",
            "blockHash": block.hash,
            "blockNumber": hex(number),
            "from": tx.sender,
            "to": tx.to,
            "cumulativeGasUsed": hex(gas_used),
            "gasUsed": hex(gas_used),
            "effectiveGasPrice": hex(price),
            "contractAddress": created,
            "logs": [log_answer(log, i, block) for i, log in enumerate(logs)],
            "logsBloom": EMPTY_BLOOM,
            "status": hex(status),
            "type": hex(tx.type),
        }
        self.blocks.append(block)
        self.txs[tx.hash] = block

    def _next_base_fee(self) -> int:
        """EIP-1559: the base fee moves by up to 1/8 toward half-full blocks."""
        head, target = self.head, GAS_LIMIT // 2
        if head.number == 0:
            return head.base_fee
        return max(head.base_fee + head.base_fee * (head.gas_used - target) // target // 8, 7)

    def _set_env(self, block: Block) -> None:
        self.evm.set_block_env(
            BlockEnv(
                number=block.number,
                coinbase=ZERO,
                timestamp=block.timestamp,
                basefee=block.base_fee,
                gas_limit=GAS_LIMIT,
                prevrandao=bytes(32),
            )
        )

    # -- executing without mining --------------------------------------------------------

    def execute(self, call: Mapping[str, Any], gas: int | None = None) -> tuple[bytes, int]:
        """Run `call` on the latest state and undo it; its output and gas used.
        `RpcError` (code 3, the revert data) if it reverts."""
        sender = str(call.get("from") or ZERO).lower()
        to = call.get("to")
        data = as_bytes(call.get("data") or call.get("input") or "0x")
        value = as_int(call.get("value", 0))
        limit = gas if gas is not None else as_int(call.get("gas", GAS_LIMIT))
        checkpoint = self.evm.snapshot()
        try:
            if to is None:
                self.evm.deploy(sender, data, value, limit)
                output = b""
            else:
                output = self.evm.message_call(sender, str(to).lower(), data, value, limit)
            result = self.evm.result
            return bytes(output), result.gas_used if result else 0
        except RuntimeError as e:
            raise _call_error(e) from None
        finally:
            self.evm.revert(checkpoint)

    def estimate(self, call: Mapping[str, Any]) -> int:
        """The least gas limit with which `call` succeeds (a binary search, as geth's)."""
        cap = as_int(call.get("gas", GAS_LIMIT))
        _, used = self.execute(call, cap)  # raises if it fails even with all the gas
        low, high = max(used, 21_000) - 1, cap
        while high - low > 1:
            middle = (low + high) // 2
            try:
                self.execute(call, middle)
                high = middle
            except RpcError:
                low = middle
        return high

    # -- JSON-RPC methods ----------------------------------------------------------------

    def _rpc_eth_chainId(self) -> str:
        return hex(self.chain_id)

    def _rpc_net_version(self) -> str:
        return str(self.chain_id)

    def _rpc_web3_clientVersion(self) -> str:
        return "treasury-devnet/revm"

    def _rpc_eth_syncing(self) -> bool:
        return False

    def _rpc_eth_blockNumber(self) -> str:
        return hex(self.head.number)

    def _rpc_eth_accounts(self) -> list[str]:
        return list(self.accounts)

    def _rpc_eth_gasPrice(self) -> str:
        return hex(self._next_base_fee() + TIP)

    def _rpc_eth_maxPriorityFeePerGas(self) -> str:
        return hex(TIP)

    def _rpc_eth_feeHistory(self, count: Any, newest: Any, percentiles: Any = None) -> Any:
        blocks = self.blocks[-max(1, min(as_int(count), len(self.blocks))) :]
        return {
            "oldestBlock": hex(blocks[0].number),
            "baseFeePerGas": [hex(b.base_fee) for b in blocks] + [hex(self._next_base_fee())],
            "gasUsedRatio": [b.gas_used / GAS_LIMIT for b in blocks],
            "reward": [[hex(TIP) for _ in percentiles or []] for _ in blocks],
        }

    def _rpc_eth_getBalance(self, address: str, tag: Any = "latest") -> str:
        return hex(self.evm.get_balance(address.lower()))

    def _rpc_eth_getTransactionCount(self, address: str, tag: Any = "latest") -> str:
        return hex(self.evm.basic(address.lower()).nonce)

    def _rpc_eth_getCode(self, address: str, tag: Any = "latest") -> str:
        return "0x" + bytes(self.evm.get_code(address.lower()) or b"").hex()

    def _rpc_eth_getStorageAt(self, address: str, slot: Any, tag: Any = "latest") -> str:
        return "0x" + self.evm.storage(address.lower(), as_int(slot)).to_bytes(32, "big").hex()

    def _rpc_eth_call(self, call: Mapping[str, Any], tag: Any = "latest", *_: Any) -> str:
        return "0x" + self.execute(call)[0].hex()

    def _rpc_eth_estimateGas(self, call: Mapping[str, Any], tag: Any = "latest") -> str:
        return hex(self.estimate(call))

    def _rpc_eth_sendRawTransaction(self, raw: str) -> str:
        return self.send_raw(as_bytes(raw))

    def _rpc_eth_sendTransaction(self, tx: Mapping[str, Any]) -> str:
        sender = str(tx.get("from", "")).lower()
        if sender not in self.accounts:
            raise RpcError(-32000, f"no key for {sender}: sign the transaction yourself")
        fields = {k: v for k, v in tx.items() if k != "from"}
        if "input" in fields:
            fields["data"] = fields.pop("input")
        fields.setdefault("nonce", self.evm.basic(sender).nonce)
        fields.setdefault("gas", self.estimate(tx))
        if "gasPrice" not in fields:
            fields.setdefault("maxPriorityFeePerGas", TIP)
            fields.setdefault("maxFeePerGas", 2 * self._next_base_fee() + TIP)
        fields = {
            k: as_int(v) if k not in ("to", "data", "accessList") else v for k, v in fields.items()
        }
        if fields.get("to"):
            fields["to"] = to_checksum_address(fields["to"])
        fields["chainId"] = self.chain_id
        try:
            signed = Account.sign_transaction(fields, self.accounts[sender])
        except (TypeError, ValueError) as e:
            raise RpcError(-32602, f"invalid transaction: {e}") from None
        return self.send_raw(bytes(signed.raw_transaction))

    def _rpc_eth_getTransactionReceipt(self, tx_hash: str) -> Any:
        block = self.txs.get(tx_hash.lower())
        return block.receipt if block else None

    def _rpc_eth_getTransactionByHash(self, tx_hash: str) -> Any:
        block = self.txs.get(tx_hash.lower())
        return transaction_answer(block) if block else None

    def _rpc_eth_getBlockByNumber(self, tag: Any, full: bool = False) -> Any:
        if tag in ("latest", "pending", "safe", "finalized"):
            return block_answer(self.head, full)
        number = 0 if tag == "earliest" else as_int(tag)
        return block_answer(self.blocks[number], full) if number < len(self.blocks) else None

    def _rpc_eth_getBlockByHash(self, block_hash: str, full: bool = False) -> Any:
        found = next((b for b in self.blocks if b.hash == block_hash.lower()), None)
        return block_answer(found, full) if found else None

    def _rpc_eth_getLogs(self, query: Mapping[str, Any]) -> list[Any]:
        head = self.head.number
        first = block_number(query.get("fromBlock", "latest"), head)
        last = block_number(query.get("toBlock", "latest"), head)
        wanted = query.get("address")
        addresses = {a.lower() for a in ([wanted] if isinstance(wanted, str) else wanted or [])}
        topics = query.get("topics") or []
        found = []
        for block in self.blocks[first : last + 1]:
            for log in block.receipt.get("logs", []):
                if addresses and log["address"] not in addresses:
                    continue
                if all(topic_matches(t, log["topics"], i) for i, t in enumerate(topics)):
                    found.append(log)
        return found


_REVERT_OUTPUT = re.compile(r"Revert \{ gas_used: (\d+), output: 0x([0-9a-fA-F]*)")
_GAS_USED = re.compile(r"gas_used: (\d+)")


def _used_by(error: RuntimeError, limit: int) -> int:
    found = _GAS_USED.search(str(error))
    return int(found.group(1)) if found else limit


def _call_error(error: RuntimeError) -> RpcError:
    """A failed execution as a node answers it: a revert is code 3 with its data."""
    text = str(error)
    found = _REVERT_OUTPUT.search(text)
    if found:
        data = "0x" + found.group(2).lower()
        reason = revert_reason(data)
        return RpcError(
            3, f"execution reverted: {reason}" if reason else "execution reverted", data
        )
    if "OutOfGas" in text:
        return RpcError(-32000, "out of gas")
    return RpcError(-32000, f"execution failed: {text}")
