"""The /v1 routes: each parses its input, calls the core, and names its status."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._service import Organization
from ..errors import ValidationError
from ..models.common import ListOf, Resource


class Call:
    """What a route sees of its request: JSON body, query, path parameters, headers."""

    def __init__(
        self, body: Any, query: dict[str, str], params: dict[str, Any], headers: Any
    ) -> None:
        self.body = body
        self.query = query
        self.params = params
        self.headers = headers

    def query_param(self, name: str) -> str:
        """A required query parameter."""
        if name not in self.query:
            raise ValidationError.field("query", name, "is required")
        return self.query[name]

    def idempotency_key(self) -> str:
        """The Idempotency-Key header, required on the routes that take it."""
        key = self.headers.get("Idempotency-Key")
        if key is None:
            raise ValidationError.field("header", "Idempotency-Key", "is required")
        return str(key)


Handler = Callable[[Organization, Call], tuple[int, Resource]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    public: bool = False
    endpoint: str | None = None  # for a handler that serves two paths

    @property
    def name(self) -> str:
        return self.endpoint or self.handler.__name__


def create_wallet(org: Organization, call: Call) -> tuple[int, Resource]:
    return 201, org.wallets.create(call.body, idempotency_key=call.idempotency_key())


def list_wallets(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.wallets.list(call.query)


def delete_wallet(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.wallets.delete(call.params["address"])


def track_wallet(org: Organization, call: Call) -> tuple[int, Resource]:
    return 201, org.wallets.track(call.body)


def create_recipient(org: Organization, call: Call) -> tuple[int, Resource]:
    return 201, org.recipients.create(call.body, idempotency_key=call.idempotency_key())


def list_recipients(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.recipients.list(call.query)


def create_bank_account(org: Organization, call: Call) -> tuple[int, Resource]:
    return 201, org.bank_accounts.create(call.body)


def list_bank_accounts(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.bank_accounts.list()


def create_webhook(org: Organization, call: Call) -> tuple[int, Resource]:
    return 201, org.webhooks.create(call.body)


def list_webhooks(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.webhooks.list()


def delete_webhook(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.webhooks.delete(call.params["webhook_id"])


def prepare_deposit(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.swaps.prepare_deposit(call.params["chain_id"], call.body)


def prepare_withdraw(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.swaps.prepare_withdraw(call.params["chain_id"], call.body)


def record_transaction(org: Organization, call: Call) -> tuple[int, Resource]:
    return 201, org.transactions.record(call.params["chain_id"], call.body)


def get_transaction(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.transactions.get(call.params["chain_id"], call.params["tx_hash"])


def get_balances(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.balances.get(call.params["chain_id"], call.params["address"])


def estimate_yield(org: Organization, call: Call) -> tuple[int, Resource]:
    return 200, org.yields.estimate(call.params["chain_id"], call.query_param("address"))


def list_yield_artifacts(org: Organization, call: Call) -> tuple[int, Resource]:
    """Public. Publishing per-period artifacts arrives with yield distributions."""
    return 200, ListOf[Resource](data=[])


ROUTES: tuple[Route, ...] = (
    Route("POST", "/wallets", create_wallet),
    Route("GET", "/wallets", list_wallets),
    Route("POST", "/wallets/track", track_wallet),
    Route("DELETE", "/wallets/<address>", delete_wallet),
    Route("POST", "/recipients", create_recipient),
    Route("GET", "/recipients", list_recipients),
    Route("POST", "/bank-accounts", create_bank_account),
    Route("GET", "/bank-accounts", list_bank_accounts),
    Route("POST", "/webhooks", create_webhook),
    Route("GET", "/webhooks", list_webhooks),
    Route("DELETE", "/webhooks/<webhook_id>", delete_webhook),
    Route("GET", "/yield/artifacts", list_yield_artifacts, public=True),
    Route("POST", "/<int:chain_id>/deposit/prepare", prepare_deposit),
    Route("POST", "/<int:chain_id>/withdraw/prepare", prepare_withdraw),
    Route("POST", "/<int:chain_id>/transactions", record_transaction),
    Route("GET", "/<int:chain_id>/transactions/<tx_hash>", get_transaction),
    Route("GET", "/<int:chain_id>/balances/<address>", get_balances),
    Route("GET", "/<int:chain_id>/yield/estimate", estimate_yield),
    Route("GET", "/<int:chain_id>/yield", estimate_yield, endpoint="get_yield"),
)
