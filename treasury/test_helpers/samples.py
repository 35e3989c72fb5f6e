"""Sample request bodies for trying the API: the demo's, the quickstart's and the tests'."""

from __future__ import annotations

from typing import Any

BANK_ACCOUNT: dict[str, Any] = {
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
