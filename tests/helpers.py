"""Small helpers shared by tests."""

from __future__ import annotations

import re
import secrets
from datetime import datetime

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
ADDRESS = re.compile(r"^0x[0-9a-f]{40}$")

BANK_ACCOUNT = {
    "account_type": "us",
    "currency": "usd",
    "bank_name": "First Bank of Testing",
    "business_name": "Acme Inc",
    "account_owner_name": "Jane Doe",
    "account_owner_type": "business",
    "account": {"account_number": "000123456789", "routing_number": "021000021"},
    "address": {
        "street_line_1": "1 Main St",
        "city": "New York",
        "state": "NY",
        "postal_code": "10001",
        "country": "USA",
    },
}


def address() -> str:
    """A random address in mixed case, as a user might paste it."""
    raw = secrets.token_hex(20)
    return "0x" + "".join(c.upper() if i % 2 else c for i, c in enumerate(raw))


def is_timestamp(value: object) -> bool:
    if not isinstance(value, str) or not ISO.match(value):
        return False
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


def idem() -> dict[str, str]:
    return {"Idempotency-Key": secrets.token_hex(8)}
