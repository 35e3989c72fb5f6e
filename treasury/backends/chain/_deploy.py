"""Deploy and fund our test contracts on any node.

`deploy_contracts` works through a `web3.Web3` on the in-process devnet and on anvil
alike. Its transactions are sent back to back with explicit nonces and gas limits (no
estimation round trips), then awaited together, so a node with a block time deploys in
about one block.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

from eth_abi.abi import encode
from eth_utils.address import to_checksum_address

from ...evm.abi import DECIMALS as DECIMALS_VIEW
from ...evm.abi import calldata, contract_address
from ...money import to_raw

#: The earner rate a fresh deployment starts with, in basis points.
DEFAULT_EARNER_RATE_BPS = 415
#: Raw units of each stablecoin the swap facility holds at start (10^9 whole tokens).
RESERVES = 10**15
#: The decimals of the tokens a deployment creates, by default: c0's is a setting
#: (`deploy_contracts`' `c0_decimals`, the devnet's ``c0_decimals``); the others are fixed.
DECIMALS = {"USDC": 6, "USDT": 6, "c0": 18, "ETH": 18}
#: The decimals c0 may be deployed with: at least the stablecoins' (the swap facility
#: scales up to c0), at most 18 (as ERC-20s go).
C0_DECIMALS_RANGE = range(6, 19)

_CREATE_GAS = 3_000_000
_CALL_GAS = 200_000
_TIP = 10**9  # 1 gwei


@functools.cache
def artifacts() -> dict[str, dict[str, Any]]:
    """ABI and creation bytecode of each contract in ``treasury/contracts/artifacts.json``."""
    text = files("treasury.contracts").joinpath("artifacts.json").read_text(encoding="utf-8")
    contracts: dict[str, dict[str, Any]] = json.loads(text)["contracts"]
    return contracts


def deploy_contracts(w3: Any, sender: Any, c0_decimals: int | None = None) -> dict[str, str]:
    """Deploy our contracts from `sender` and return `ChainConfig.addresses` (lowercase).

    `sender` is an address the node signs for (the devnet's and anvil's dev accounts) or an
    eth-account ``LocalAccount``. c0 gets `c0_decimals` (default: `DECIMALS`' entry). Also
    makes the swap facility the c0 minter and seeds it with `RESERVES` of USDC and USDT so
    that withdrawals work; `sender` is the yield distributor's operator.
    """
    places = check_c0_decimals(DECIMALS["c0"] if c0_decimals is None else c0_decimals)
    address = _address_of(sender)
    nonce = w3.eth.get_transaction_count(to_checksum_address(address), "pending")
    at = contract_addresses(address, nonce)
    names = list(at)
    steps: list[tuple[str | None, bytes]] = [
        (None, _creation("TestStablecoin", ["string", "string"], ["USD Coin", "USDC"])),
        (None, _creation("TestTetherToken", ["string", "string"], ["Tether USD", "USDT"])),
        (None, _creation("C0Token", ["uint8"], [places])),
        (
            None,
            _creation("SwapFacility", ["address"] * 3, [at["c0"], at["USDC"], at["USDT"]]),
        ),
        (None, _creation("EarnerRateSource", ["uint32"], [DEFAULT_EARNER_RATE_BPS])),
        (None, _creation("Multicall3", [], [])),
        (None, _creation("YieldDistributor", ["address"] * 2, [at["c0"], address])),
        (at["c0"], calldata("setMinter(address,bool)", at["swap_facility"], True)),
        (at["USDC"], calldata("mint(address,uint256)", at["swap_facility"], RESERVES)),
        (at["USDT"], calldata("mint(address,uint256)", at["swap_facility"], RESERVES)),
    ]
    fees = _fees(w3)
    hashes = [
        _send(w3, sender, {"to": to, "data": data, "nonce": nonce + i, **fees})
        for i, (to, data) in enumerate(steps)
    ]
    for i, tx_hash in enumerate(hashes):
        receipt = _wait(w3, tx_hash, what="deploying our contracts")
        if i < len(names) and str(receipt["contractAddress"]).lower() != at[names[i]]:
            raise RuntimeError(f"{names[i]} was deployed at an unexpected address")
    return at


def check_c0_decimals(value: object) -> int:
    """`value` if c0 may be deployed with that many decimals, else a `ValueError`."""
    if type(value) is not int or value not in C0_DECIMALS_RANGE:
        first, last = C0_DECIMALS_RANGE[0], C0_DECIMALS_RANGE[-1]
        raise ValueError(
            f"c0_decimals must be a whole number from {first} to {last}, got {value!r}"
        )
    return value


def contract_addresses(deployer: str, nonce: int) -> dict[str, str]:
    """Where `deploy_contracts` puts our contracts when `deployer` starts at `nonce`."""
    names = [
        "USDC",
        "USDT",
        "c0",
        "swap_facility",
        "earner_rate_source",
        "multicall",
        "yield_distributor",
    ]
    return {name: contract_address(deployer, nonce + i) for i, name in enumerate(names)}


def fund(
    w3: Any, sender: Any, addresses: Mapping[str, str], to: str, symbol: str, amount: Any
) -> str:
    """Give `to` an `amount` (whole units, at the decimals the token answers) of USDC,
    USDT, c0 (minted) or ETH (sent).

    `sender` must own the tokens (the deployer). Returns the mined transaction's hash.
    """
    symbol = {s.lower(): s for s in DECIMALS}.get(symbol.lower(), symbol)
    if symbol not in DECIMALS:
        raise ValueError(f"unknown symbol {symbol!r}; one of {', '.join(DECIMALS)}")
    raw = to_raw(amount, DECIMALS["ETH"] if symbol == "ETH" else decimals(w3, addresses[symbol]))
    recipient = to_checksum_address(to)
    if symbol == "ETH":
        tx: dict[str, Any] = {"to": recipient, "value": raw, "gas": 21_000}
    else:
        tx = {"to": addresses[symbol], "data": calldata("mint(address,uint256)", recipient, raw)}
    tx_hash = _send(w3, sender, {**tx, **_fees(w3)})
    _wait(w3, tx_hash, what=f"funding {symbol}")
    return tx_hash


def decimals(w3: Any, token: str) -> int:
    """The decimals `token` answers (``decimals()``)."""
    data = w3.eth.call(
        {"to": to_checksum_address(token), "data": "0x" + DECIMALS_VIEW.encode().hex()}
    )
    return int(DECIMALS_VIEW.decode(bytes(data))[0])


def _creation(name: str, types: list[str], args: list[Any]) -> bytes:
    bytecode = artifacts()[name]["bytecode"].removeprefix("0x")
    return bytes.fromhex(bytecode) + encode(types, args)


def _address_of(sender: Any) -> str:
    return str(getattr(sender, "address", sender)).lower()


def _fees(w3: Any) -> dict[str, int]:
    base = int(w3.eth.get_block("latest")["baseFeePerGas"])
    return {"maxFeePerGas": 2 * base + _TIP, "maxPriorityFeePerGas": _TIP}


def _send(w3: Any, sender: Any, tx: dict[str, Any]) -> str:
    tx = {"gas": _CALL_GAS if tx.get("to") else _CREATE_GAS, **tx}
    if tx.get("to") is None:
        tx.pop("to", None)
    else:
        tx["to"] = to_checksum_address(tx["to"])
    if "data" in tx:
        tx["data"] = "0x" + tx["data"].hex()
    if isinstance(sender, str):
        tx_hash = w3.eth.send_transaction({"from": to_checksum_address(sender), **tx})
    else:
        if "nonce" not in tx:
            tx["nonce"] = w3.eth.get_transaction_count(sender.address, "pending")
        signed = sender.sign_transaction({"chainId": w3.eth.chain_id, "type": 2, **tx})
        tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
    return "0x" + bytes(tx_hash).hex()


def _wait(w3: Any, tx_hash: str, *, what: str) -> Any:
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=60, poll_latency=0.05)
    if receipt["status"] != 1:
        raise RuntimeError(f"transaction {tx_hash} reverted while {what}")
    return receipt
