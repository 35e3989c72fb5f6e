"""The devnet node's data and their wire shapes: signed transactions decoded on the way
in; blocks, transactions, receipts and logs shaped as JSON-RPC answers on the way out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import rlp
from eth_account import Account
from eth_utils.crypto import keccak

GAS_LIMIT = 30_000_000  # a block's
ZERO = "0x" + "00" * 20
EMPTY_BLOOM = "0x" + "00" * 256


class RpcError(Exception):
    """A JSON-RPC error answer (``code``, ``message``, optional ``data``)."""

    def __init__(self, code: int, message: str, data: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def answer(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


@dataclass(frozen=True)
class Tx:
    hash: str
    raw: bytes
    sender: str
    type: int
    chain_id: int | None
    nonce: int
    to: str | None
    value: int
    data: bytes
    gas: int
    max_fee: int
    tip: int

    def price(self, base_fee: int) -> int:
        return min(self.max_fee, base_fee + self.tip)


@dataclass
class Block:
    number: int
    hash: str
    parent_hash: str
    timestamp: int
    base_fee: int
    gas_used: int = 0
    tx: Tx | None = None
    receipt: dict[str, Any] = field(default_factory=dict)


#: The RLP fields of each transaction type we take, in order (EIP-2718 envelopes: 1, 2).
_LAYOUTS = {
    0: ("nonce", "gasPrice", "gas", "to", "value", "data", "v", "r", "s"),
    1: ("chainId", "nonce", "gasPrice", "gas", "to", "value", "data", "accessList", "v", "r", "s"),
    2: (
        "chainId",
        "nonce",
        "maxPriorityFeePerGas",
        "maxFeePerGas",
        "gas",
        "to",
        "value",
        "data",
        "accessList",
        "v",
        "r",
        "s",
    ),
}


def decode(raw: bytes, sender: str | None = None) -> Tx:
    """A signed transaction's fields; recovers the sender unless given (replays)."""
    kind = 0 if raw[:1] >= b"\xc0" else raw[0]
    if kind not in _LAYOUTS:
        raise RpcError(-32000, f"transaction type {kind} not supported")
    try:
        items = rlp.decode(raw if kind == 0 else raw[1:])
        if not isinstance(items, list) or len(items) != len(_LAYOUTS[kind]):
            raise ValueError("wrong number of fields")
        fields = dict(zip(_LAYOUTS[kind], items, strict=True))
        number = {k: int.from_bytes(v, "big") for k, v in fields.items() if isinstance(v, bytes)}
        sender = sender or Account.recover_transaction(raw).lower()
    except Exception as e:
        raise RpcError(-32000, f"invalid transaction: {e}") from None
    if kind == 0:
        v = number["v"]
        chain_id = (v - 35) // 2 if v >= 35 else None
    else:
        chain_id = number["chainId"]
    max_fee = number.get("maxFeePerGas", number.get("gasPrice", 0))
    to = fields["to"]
    return Tx(
        hash="0x" + keccak(raw).hex(),
        raw=raw,
        sender=sender,
        type=kind,
        chain_id=chain_id,
        nonce=number["nonce"],
        to="0x" + to.hex() if to else None,
        value=number["value"],
        data=bytes(fields["data"]),
        gas=number["gas"],
        max_fee=max_fee,
        tip=number.get("maxPriorityFeePerGas", max_fee),
    )


def intrinsic_gas(tx: Tx) -> int:
    zeros = tx.data.count(0)
    base = 53_000 if tx.to is None else 21_000
    return base + 4 * zeros + 16 * (len(tx.data) - zeros)


def log_answer(log: Any, index: int, block: Block) -> dict[str, Any]:
    assert block.tx is not None
    topics, data = log.data
    return {
        "address": log.address.lower(),
        "topics": ["0x" + bytes(t).hex() for t in topics],
        "data": "0x" + bytes(data).hex(),
        "blockNumber": hex(block.number),
        "blockHash": block.hash,
        "transactionHash": block.tx.hash,
        "transactionIndex": "0x0",
        "logIndex": hex(index),
        "removed": False,
    }


def transaction_answer(block: Block) -> dict[str, Any]:
    tx = block.tx
    assert tx is not None
    return {
        "hash": tx.hash,
        "from": tx.sender,
        "to": tx.to,
        "nonce": hex(tx.nonce),
        "value": hex(tx.value),
        "input": "0x" + tx.data.hex(),
        "gas": hex(tx.gas),
        "gasPrice": hex(tx.price(block.base_fee)),
        "maxFeePerGas": hex(tx.max_fee),
        "maxPriorityFeePerGas": hex(tx.tip),
        "type": hex(tx.type),
        "chainId": hex(tx.chain_id) if tx.chain_id is not None else None,
        "blockHash": block.hash,
        "blockNumber": hex(block.number),
        "transactionIndex": "0x0",
    }


def block_answer(block: Block, full: bool) -> dict[str, Any]:
    txs: list[Any] = []
    if block.tx is not None:
        txs = [transaction_answer(block) if full else block.tx.hash]
    return {
        "number": hex(block.number),
        "hash": block.hash,
        "parentHash": block.parent_hash,
        "timestamp": hex(block.timestamp),
        "baseFeePerGas": hex(block.base_fee),
        "gasLimit": hex(GAS_LIMIT),
        "gasUsed": hex(block.gas_used),
        "miner": ZERO,
        "difficulty": "0x0",
        "totalDifficulty": "0x0",
        "extraData": "0x",
        "size": "0x0",
        "nonce": "0x0000000000000000",
        "mixHash": "0x" + "00" * 32,
        "logsBloom": EMPTY_BLOOM,
        "sha3Uncles": "0x" + "00" * 32,
        "stateRoot": "0x" + "00" * 32,
        "receiptsRoot": "0x" + "00" * 32,
        "transactionsRoot": "0x" + "00" * 32,
        "uncles": [],
        "transactions": txs,
    }


def block_number(tag: Any, head: int) -> int:
    if tag in ("latest", "pending", "safe", "finalized"):
        return head
    return 0 if tag == "earliest" else as_int(tag)


def topic_matches(wanted: Any, topics: list[str], index: int) -> bool:
    if wanted is None:
        return True
    if index >= len(topics):
        return False
    options = [wanted] if isinstance(wanted, str) else wanted
    return topics[index] in {str(o).lower() for o in options}


def as_int(value: Any) -> int:
    if isinstance(value, str):
        return int(value, 16) if value.startswith("0x") else int(value)
    return int(value)


def as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return bytes.fromhex(value.removeprefix("0x"))
    return bytes(value)
