"""Small helpers shared by tests."""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from typing import Any

from treasury.test_helpers.samples import BANK_ACCOUNT

__all__ = ["BANK_ACCOUNT"]  # the sample body of a bank account, one for the library and tests

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
ADDRESS = re.compile(r"^0x[0-9a-f]{40}$")


def address() -> str:
    """A random address in mixed case with its EIP-55 checksum, as a user might paste it."""
    from eth_utils.address import to_checksum_address

    return to_checksum_address("0x" + secrets.token_hex(20))


def is_timestamp(value: object) -> bool:
    if not isinstance(value, str) or not ISO.match(value):
        return False
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


def idem() -> dict[str, str]:
    return {"Idempotency-Key": secrets.token_hex(8)}


def onramp(bank_account_id: str, to_address: str, amount: str = "100", **extra: object) -> dict:
    """The body of an on-ramp: USD pushed by ACH from a bank account, USDC to an address."""
    return {
        "amount": amount,
        "source": {
            "currency": "usd",
            "payment_rail": "ach_push",
            "external_account_id": bank_account_id,
        },
        "destination": {"currency": "usdc", "payment_rail": "ethereum", "to_address": to_address},
        **extra,
    }


def offramp(from_address: str, bank_account_id: str, amount: str = "100", **extra: object) -> dict:
    """The body of an off-ramp: a wallet's USDC paid out by ACH to a bank account."""
    return {
        "amount": amount,
        "source": {"currency": "usdc", "payment_rail": "ethereum", "from_address": from_address},
        "destination": {
            "currency": "usd",
            "payment_rail": "ach",
            "external_account_id": bank_account_id,
        },
        **extra,
    }


def swap(
    pairing: str, from_address: str, to_address: str, amount: str = "100", **extra: object
) -> dict:
    """The body of a deposit (USDC -> c0) or a withdrawal (c0 -> USDC) from a wallet."""
    currencies = ("usdc", "c0") if pairing == "deposit" else ("c0", "usdc")
    return {
        "amount": amount,
        "source": {
            "currency": currencies[0],
            "payment_rail": "ethereum",
            "from_address": from_address,
        },
        "destination": {
            "currency": currencies[1],
            "payment_rail": "ethereum",
            "to_address": to_address,
        },
        **extra,
    }


# -- yield claims, hashed with the tests' own code (OpenZeppelin standard-v1, sorted pairs) --

CLAIM_ENCODING = ["uint256", "address", "uint256"]


def claim_leaf(index: int, account: str, amount: int) -> bytes:
    """A claim's leaf: keccak of keccak of its ABI encoding (index, account, amount)."""
    from eth_abi import encode
    from eth_hash.auto import keccak

    return keccak(keccak(encode(CLAIM_ENCODING, [index, account, amount])))


def sorted_pair(a: bytes, b: bytes) -> bytes:
    """A parent node: keccak of the two children, the smaller first."""
    from eth_hash.auto import keccak

    return keccak(min(a, b) + max(a, b))


def proof_root(index: int, account: str, amount: int, proof: list[str]) -> str:
    """The root (0x hex) that a claim's proof leads to."""
    node = claim_leaf(index, account, amount)
    for sibling in proof:
        node = sorted_pair(node, bytes.fromhex(sibling[2:]))
    return "0x" + node.hex()


def events(t: object, prefix: str = "") -> list[tuple[str, dict]]:
    """The outbox's events whose type starts with `prefix`, oldest first, as (type, data),
    payloads opened as the dispatcher opens them."""
    import json

    from treasury._records.events import opened

    runtime = t._runtime  # type: ignore[attr-defined]
    with runtime.storage.read() as tx:
        rows = tx.query("SELECT type, payload FROM events ORDER BY id")
    found = []
    for row in rows:
        if row["type"].startswith(prefix):
            payload = json.loads(opened(runtime.secrets, row["payload"]))
            assert payload["event"] == payload["type"] == row["type"]
            found.append((row["type"], payload["data"]))
    return found


#: The whole policy with every control off (`PUT /v1/policy` takes every field).
POLICY_OFF: dict[str, Any] = {
    "approvalThreshold": None,
    "dailyLimit": None,
    "destinations": "any",
    "destinationCooldownHours": 0,
    "gasStation": None,
}


def policy(**given: Any) -> dict[str, Any]:
    """A whole policy body: `given` (camelCase) over every control off, no cooldown."""
    return {**POLICY_OFF, **given}


def py_policy(**given: Any) -> dict[str, Any]:
    """`policy` for `org.policy.put(**...)` (snake_case)."""
    off = {
        "approval_threshold": None,
        "daily_limit": None,
        "destinations": "any",
        "destination_cooldown_hours": 0,
        "gas_station": None,
    }
    return {**off, **given}


def rpc(url: str, method: str, *params: Any) -> Any:
    """One JSON-RPC call to the node at `url` (anvil's own methods too); its result."""
    import httpx

    body = httpx.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
    ).json()
    assert "error" not in body, body
    return body["result"]
