"""``http://`` and ``https://``: a real node over web3 JSON-RPC.

The primitives speak JSON-RPC directly over one thread-safe `httpx.Client`: `receipts`
sends one batch request per `BATCH_SIZE` hashes, so indexing 10,000 transactions takes
20 round trips. `web3` is built on first use only. Transport failures, HTTP errors and
JSON-RPC errors become `UpstreamError`; reverts (JSON-RPC code 3, or an "execution
reverted" message) become `Reverted` with the decoded reason.

A chain of `presets` (Ethereum, Sepolia) starts from its public addresses, rail and
exit path; configured values override them.

Configured with a ``minter_key`` (an anvil node started by ``treasury devnet``),
`RpcChain.from_config` opens a `MintingRpcChain`: a test chain (`minting.MintingChain`) that
mints with that key, and whose deposits count at once (`confirmations` 0) unless the
configuration says otherwise.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, NoReturn, Self, cast
from urllib.parse import urlsplit

import httpx

from ...errors import UpstreamError
from ...evm.abi import call_fields, check_hash, is_address, revert_reason
from .base import (
    ADDRESS_KEYS,
    CANONICAL_MULTICALL3,
    OPTIONAL_ADDRESS_KEYS,
    Block,
    Chain,
    ChainConfig,
    Log,
    Receipt,
    Reverted,
    Topic,
)
from .presets import with_preset

__all__ = ["BATCH_SIZE", "CALLS_PER_REQUEST", "MintingRpcChain", "RpcChain"]

#: Receipts asked for in one JSON-RPC batch request.
BATCH_SIZE = 500
#: Signed transactions sent in one batch request (nodes cap a batch: geth at 1,000 calls).
SEND_BATCH = 100
#: ``eth_call``s sent in one JSON-RPC batch request by `calls_at`: each may be a
#: multicall of 100 balances (about 40 KB of hex), so a request stays near 400 KB, under
#: the body limits of nodes (anvil refuses a 2 MB batch).
CALLS_PER_REQUEST = 10
_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


class RpcChain(Chain):
    """A chain reached over JSON-RPC at `config.url`; checks the node's chain id on connect.

    Pass `client` to reuse or instrument an `httpx.Client` (e.g. a transport or event
    hooks that count requests); the chain then does not close it.
    """

    def __init__(self, config: ChainConfig, *, client: httpx.Client | None = None) -> None:
        config = with_preset(config)
        required = [k for k in ADDRESS_KEYS if k not in OPTIONAL_ADDRESS_KEYS]
        missing = [k for k in required if k not in config.addresses]
        if missing:
            raise ValueError(
                f"chain {config.chain_id} needs the addresses of {', '.join(missing)} "
                "(ChainConfig.addresses)"
            )
        addresses = {"multicall": CANONICAL_MULTICALL3, **config.addresses}
        for key, value in addresses.items():
            if not is_address(value):
                raise ValueError(f"chain {config.chain_id}: {key} is not an address: {value!r}")
        self.chain_id = config.chain_id
        self.url = config.url
        parts = urlsplit(config.url)  # never the path or credentials: they may hold API keys
        port = f":{parts.port}" if parts.port else ""
        self._where = f"chain {config.chain_id} at {parts.scheme}://{parts.hostname}{port}"
        self.addresses = {k: addresses[k].lower() for k in ADDRESS_KEYS if k in addresses}
        core = [self.addresses[k] for k in ("USDC", "USDT", "c0") if k in self.addresses]
        self.tokens = core + [t.lower() for t in config.tokens if t.lower() not in core]
        self.settings(config)
        self.rail = config.rail
        assert config.exit_path is not None  # with_preset settles it
        self.exit_path = config.exit_path
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=_TIMEOUT)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._web3: Any = None
        try:
            answered = int(self._request("eth_chainId", []), 16)
        except Exception:
            self.close()
            raise
        if answered != self.chain_id:
            self.close()
            raise ValueError(
                f"{self._where} answers chain id {answered}: the node is another chain "
                "than the one configured"
            )

    @classmethod
    def from_config(cls, config: ChainConfig) -> Self:
        """An `RpcChain`, or a `MintingRpcChain` when `config` holds a ``minter_key``."""
        if config.c0_decimals is not None:
            raise ValueError(
                "c0_decimals is a setting of devnet://, which deploys its own c0; a node's"
                " c0 answers its decimals"
            )
        if config.minter_key is not None and not issubclass(cls, MintingRpcChain):
            return cast(Self, MintingRpcChain(config))
        return cls(config)

    @property
    def web3(self) -> Any:
        """A `web3.Web3` over HTTP to the same node (built on first use)."""
        with self._lock:
            if self._web3 is None:
                from web3 import HTTPProvider, Web3

                self._web3 = Web3(HTTPProvider(self.url))
            return self._web3

    # -- the Chain interface --------------------------------------------------------

    def call(self, to: str, data: bytes) -> bytes:
        result = self._request("eth_call", [{"to": to.lower(), "data": _hex(data)}, "latest"])
        return bytes.fromhex(str(result).removeprefix("0x"))

    def calls_at(self, calls: Sequence[tuple[str, bytes]], block: int) -> list[bytes]:
        tag = hex(block)
        out: list[bytes] = []
        for start in range(0, len(calls), CALLS_PER_REQUEST):
            chunk = calls[start : start + CALLS_PER_REQUEST]
            results = self._batch(
                [("eth_call", [{"to": to.lower(), "data": _hex(data)}, tag]) for to, data in chunk]
            )
            out.extend(bytes.fromhex(str(r).removeprefix("0x")) for r in results)
        return out

    def receipts(self, hashes: Sequence[str]) -> list[Receipt | None]:
        checked = [check_hash(h) for h in hashes]
        out: list[Receipt | None] = []
        for start in range(0, len(checked), BATCH_SIZE):
            chunk = checked[start : start + BATCH_SIZE]
            results = self._batch([("eth_getTransactionReceipt", [h]) for h in chunk])
            out.extend(_receipt(r) if r else None for r in results)
        return out

    def head(self) -> int:
        return int(self._request("eth_blockNumber", []), 16)

    def blocks(self, numbers: Sequence[int]) -> list[Block | None]:
        answers = self._batch([("eth_getBlockByNumber", [hex(n), False]) for n in numbers])
        return [_block(answer) if answer else None for answer in answers]

    def logs(
        self, first: int, last: int, contracts: Sequence[str], topics: Sequence[Topic]
    ) -> list[Log]:
        query = _logs_query(first, last, contracts, topics)
        return [_log(found) for found in self._request("eth_getLogs", [query])]

    def send_raw_transaction(self, raw: bytes) -> str:
        return str(self._request("eth_sendRawTransaction", [_hex(raw)])).lower()

    def send_raw_transactions(self, raws: Sequence[bytes]) -> list[str | UpstreamError]:
        """`SEND_BATCH` transactions a JSON-RPC batch request, in order; an element the
        node answered with an error is that error, one it left unanswered ambiguous."""
        sent: list[str | UpstreamError] = []
        for start in range(0, len(raws), SEND_BATCH):
            requests = [
                {
                    "jsonrpc": "2.0",
                    "id": next(self._ids),
                    "method": "eth_sendRawTransaction",
                    "params": [_hex(raw)],
                }
                for raw in raws[start : start + SEND_BATCH]
            ]
            answers = self._post(requests)
            if not isinstance(answers, list):
                _raise(answers, "eth_sendRawTransaction")
            by_id = {a.get("id"): a for a in answers if isinstance(a, dict)}
            for request in requests:
                answer = by_id.get(request["id"])
                if answer is None:
                    left = f"{self._where} left eth_sendRawTransaction unanswered"
                    sent.append(UpstreamError(left, ambiguous=True))
                elif "error" in answer:
                    try:
                        _raise(answer, "eth_sendRawTransaction")
                    except UpstreamError as error:
                        sent.append(error)
                else:
                    sent.append(str(answer.get("result")).lower())
        return sent

    def pending_nonce(self, address: str) -> int:
        return int(self._request("eth_getTransactionCount", [address.lower(), "pending"]), 16)

    def mined_nonce(self, address: str) -> int:
        return int(self._request("eth_getTransactionCount", [address.lower(), "latest"]), 16)

    def fee_fields(self) -> dict[str, int]:
        block, tip = self._batch(
            [("eth_getBlockByNumber", ["latest", False]), ("eth_maxPriorityFeePerGas", [])]
        )
        if block.get("baseFeePerGas") is None:  # a chain without EIP-1559
            return {"gasPrice": int(self._request("eth_gasPrice", []), 16)}
        priority = int(tip, 16)
        return {
            "maxFeePerGas": 2 * int(block["baseFeePerGas"], 16) + priority,
            "maxPriorityFeePerGas": priority,
        }

    def estimate_gas(self, transaction: Mapping[str, Any]) -> int:
        fields = {  # JSON-RPC quantities are 0x hex
            k: v if k in ("from", "to", "data") else hex(v)
            for k, v in call_fields(transaction).items()
        }
        return int(self._request("eth_estimateGas", [fields]), 16)

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    # -- JSON-RPC -------------------------------------------------------------------

    def _request(self, method: str, params: list[Any]) -> Any:
        (result,) = self._batch([(method, params)], single=True)
        return result

    def _batch(self, calls: list[tuple[str, list[Any]]], *, single: bool = False) -> list[Any]:
        """Results of `calls` in order, in one HTTP request."""
        if not calls:
            return []
        requests: list[dict[str, Any]] = [
            {"jsonrpc": "2.0", "id": next(self._ids), "method": m, "params": p} for m, p in calls
        ]
        body = self._post(requests[0] if single else requests)
        answers = [body] if single and isinstance(body, dict) else body
        if not isinstance(answers, list):
            _raise(body, calls[0][0])
        by_id = {a.get("id"): a for a in answers if isinstance(a, dict)}
        results = []
        for request in requests:
            answer = by_id.get(request["id"])
            if answer is None:
                raise UpstreamError(
                    f"{self._where} left {request['method']} unanswered", ambiguous=True
                )
            if "error" in answer:
                _raise(answer, request["method"])
            results.append(answer.get("result"))
        return results

    def _post(self, payload: Any) -> Any:
        try:
            response = self._client.post(self.url, json=payload)
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:  # nothing reached the node
            raise UpstreamError(f"{self._where} unreachable: {type(e).__name__}") from e
        except httpx.HTTPError as e:  # sent, maybe received: it may have taken effect
            raise UpstreamError(
                f"{self._where} did not answer: {type(e).__name__}", ambiguous=True
            ) from e
        if response.status_code != httpx.codes.OK:  # a gateway may have passed it on
            raise UpstreamError(
                f"{self._where} answered HTTP {response.status_code}", ambiguous=True
            )
        try:
            return response.json()
        except ValueError as e:
            raise UpstreamError(f"{self._where} answered invalid JSON", ambiguous=True) from e


class MintingRpcChain(RpcChain):
    """A node whose test contracts `ChainConfig.minter_key` owns (anvil under
    ``treasury devnet``): a test chain (`minting.MintingChain`)."""

    confirmations = 0

    def __init__(self, config: ChainConfig, *, client: httpx.Client | None = None) -> None:
        if config.minter_key is None:
            raise ValueError(f"chain {config.chain_id}: a minting chain needs a minter_key")
        super().__init__(config, client=client)
        self._minter_key = config.minter_key
        self._minting = threading.Lock()

    @property
    def minter_key(self) -> str:
        return self._minter_key

    def faucet(self, address: str, symbol: str, amount: str | int | Decimal) -> str:
        from eth_account import Account

        from ._deploy import fund

        minter = Account.from_key(self._minter_key)
        with self._minting:  # one sender in this process: its nonces in order
            return fund(self.web3, minter, self.addresses, address, symbol, amount)


def _raise(answer: Any, method: str) -> NoReturn:
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        raise UpstreamError(f"{method}: malformed JSON-RPC answer")
    message = str(error.get("message", ""))
    if error.get("code") == 3 or "revert" in message.lower():
        reason = revert_reason(error.get("data")) or revert_reason(message)
        raise Reverted(f"Execution reverted: {reason}" if reason else None)
    raise UpstreamError(f"{method} failed: {message} (code {error.get('code')})")


def _receipt(r: Mapping[str, Any]) -> Receipt | None:
    if r.get("blockNumber") is None:
        return None
    status = r.get("status")
    return Receipt(
        transaction_hash=str(r["transactionHash"]).lower(),
        transaction_index=int(r["transactionIndex"], 16),
        block_hash=str(r["blockHash"]).lower(),
        block_number=int(r["blockNumber"], 16),
        sender=str(r["from"]).lower(),
        to=str(r["to"]).lower() if r.get("to") else None,
        contract_address=str(r["contractAddress"]).lower() if r.get("contractAddress") else None,
        status=int(status, 16) if status is not None else 1,
        type=int(r.get("type") or "0x0", 16),
        root=str(r["root"]).lower() if r.get("root") else None,
    )


def _block(answer: Mapping[str, Any]) -> Block:
    base_fee = answer.get("baseFeePerGas")
    return Block(
        number=int(answer["number"], 16),
        hash=str(answer["hash"]).lower(),
        base_fee=None if base_fee is None else int(base_fee, 16),
    )


def _logs_query(
    first: int, last: int, contracts: Sequence[str], topics: Sequence[Topic]
) -> dict[str, Any]:
    """The filter object of ``eth_getLogs`` for `Chain.logs`'s arguments."""
    return {
        "fromBlock": hex(first),
        "toBlock": hex(last),
        "address": [c.lower() for c in contracts],
        "topics": [t if t is None or isinstance(t, str) else list(t) for t in topics],
    }


def _log(found: Mapping[str, Any]) -> Log:
    return Log(
        contract=str(found["address"]).lower(),
        topics=tuple(str(topic).lower() for topic in found["topics"]),
        data=bytes.fromhex(str(found["data"]).removeprefix("0x")),
        block_number=int(found["blockNumber"], 16),
        transaction_hash=str(found["transactionHash"]).lower(),
        log_index=int(found["logIndex"], 16),
        block_hash=str(found.get("blockHash") or "").lower(),
    )


def _hex(data: bytes) -> str:
    return "0x" + bytes(data).hex()
