"""A fake fiat provider: a threaded HTTP/1.1 server on loopback speaking the subset of
Bridge's REST API that `treasury.backends.fiat.http.HttpFiat` uses, with its state machine.

Each rule is the provider's, from its API reference (apidocs.bridge.xyz):

* ``Api-Key`` is checked (401). POSTs need an ``Idempotency-Key``; the first success per
  endpoint is replayed for the same body, another body is ``not_truly_idempotent``
  (``strict_idempotency=False`` replays by the key alone); "Bridge guarantees idempotent
  behavior for 24 hours after the initial request ... After the 24-hour window expires,
  reusing the same Idempotency-Key will result in a 422" (api-reference/introduction/
  idempotence), by the fake's clock (``clock=``, a seam for tests).
* Onboarding: ``POST /kyc_links`` (``type``, ``full_name``, ``email`` required) creates a
  customer that is not approved, with a hosted KYB link (``kyc_link``) and a terms of
  service link (``tos_link``), "completed before they can be approved" (platform/customers/
  customers/kyclinks); ``GET /kyc_links?customer_id=`` reads them; ``POST
  /customers/{c}/simulate_kyc_approval`` approves, as the provider's sandbox does
  (api-reference/sandbox/simulate-kyc-approval-sandbox-only), as does `approve`. A
  customer not approved may hold no external account, wallet, virtual account or
  transfer: 403 (a bare ``POST /customers`` is not approved either).
* External accounts: ``account_owner_name`` "must be at least 3 characters, at most 35
  characters" and printable ASCII for ACH (api-reference/external-accounts), else 400.
* Transfers go ``awaiting_funds`` → ``funds_received`` → ``payment_submitted`` →
  ``payment_processed`` (platform/orchestration/transfers/transfer-states), one state per
  read: each ``GET /transfers/{id}`` moves that transfer, each scan of ``GET /transfers``
  (the list, ``updated_after_ms`` filtered, at most ``limit`` a page, least recently
  updated first; a scan's further pages follow a full page and ask from a later time)
  every open one, calling ``payout(chain_id, to_address, amount) -> tx_hash`` at an
  on-ramp's ``payment_submitted`` and ``deposit_arrived(chain_id, address, amount)`` while
  an off-ramp awaits funds. `set_state` drives a transfer into any documented state
  (`STATES`: the refund and error paths too); ``in_review`` and ``missing_return_policy``
  wait there, the exception paths end. ``DELETE /transfers/{id}`` cancels one that awaits
  funds. ``GET /customers/{c}/transfers`` lists a customer's, newest first, paged by
  ``starting_after``.

Failures apply to the next `times` requests matching ``method=`` and ``path=`` (`fnmatch`,
below the base): `fail` (5xx) and `refuse` (400) do nothing; `stall` does it, then answers
later than clients wait; `slow` waits, then answers normally; `garble` does it and answers
a body that is not JSON.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

__all__ = ["BASE", "STATES", "FakeProvider", "Received", "fake_provider", "onboard"]

#: Path of the API below the server's root (the provider's version prefix).
BASE = "/v0"
ROUTING_NUMBER = "101019644"  # passes the ABA checksum
_CHAINS = {"ethereum": 31337, "base": 8453, "polygon": 137, "arbitrum": 42161, "optimism": 10}
_NEXT = {"awaiting_funds": "funds_received", "funds_received": "payment_submitted"}
_NEXT |= {"payment_submitted": "payment_processed"}
#: Every documented transfer state (platform/orchestration/transfers/transfer-states).
STATES = (
    "awaiting_funds",
    "in_review",
    "funds_received",
    "payment_submitted",
    "payment_processed",
    "undeliverable",
    "returned",
    "missing_return_policy",
    "refunded",
    "refund_in_flight",
    "refund_failed",
    "canceled",
    "error",
)
#: How long an Idempotency-Key's answer is replayed; after, reusing it is a 422.
IDEMPOTENCY_WINDOW = timedelta(hours=24)
_OWNER_NAME = re.compile(r"(?!\s*$)[\x20-\x7E]{3,35}")  # ACH: 3-35 printable ASCII
_TEXT = re.compile(r"\S.*", re.DOTALL)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_DECIMAL = re.compile(r"[0-9]+(\.[0-9]+)?")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Received:
    method: str
    path: str  # below the base, e.g. "/transfers"
    headers: httpx.Headers
    body: Any  # the parsed JSON, or None
    client_port: int | None  # the client's TCP port (one per kept-alive connection)


@dataclass
class _Rule:
    kind: str
    times: int
    match: dict[str, str]  # method=, path=
    status: int = 500
    code: str = "server_error"
    message: str = "Internal error"
    seconds: float = 0.0


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str, key: str | None = None) -> None:
        super().__init__(message)
        source = {"source": {"location": "body", "key": key}} if key else {}
        self.status, self.body = status, {"code": code, "message": message, **source}


class FakeProvider(ThreadingHTTPServer):
    """The server: the provider's state, its failure controls and what it received."""

    daemon_threads = True
    request_queue_size = 128  # many clients connect at once

    def __init__(
        self,
        *,
        api_key: str | None = None,
        payout: Callable[[int, str, str], str] | None = None,
        deposit_arrived: Callable[[int, str, str], bool] | None = None,
        chains: Mapping[str, int] | None = None,
        strict_idempotency: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api_key = api_key or "sk-test-" + secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.server_address[1]}{BASE}"
        self.payout = payout or (lambda chain_id, address, amount: "0x" + secrets.token_hex(32))
        self.deposit_arrived = deposit_arrived or (lambda chain_id, address, amount: True)
        self.chains = dict(chains or _CHAINS)
        self.strict_idempotency = strict_idempotency
        self.clock = clock or (lambda: datetime.now(UTC))
        self.kyc_links: dict[str, dict[str, Any]] = {}
        self._scanning, self._since = False, -1  # the list's last page was full, from when
        self.customers: dict[str, dict[str, Any]] = {}
        self.accounts: dict[str, dict[str, Any]] = {}
        self.transfers: dict[str, dict[str, Any]] = {}
        self.wallets: dict[str, dict[str, Any]] = {}
        self.virtual_accounts: dict[str, dict[str, Any]] = {}
        self.balances: dict[str, Decimal] = {}  # wallet id -> USDB
        self.requests: list[Received] = []
        self._rules: list[_Rule] = []
        self._replies: dict[tuple[str, str], tuple[str, dict[str, Any], datetime]] = {}
        self._lock = threading.RLock()
        self._closing = threading.Event()

    def fail(self, times: int = 1, status: int = 500, **match: str) -> None:
        self._rules.append(_Rule("fail", times, match, status=status))

    def refuse(
        self, message: str, code: str = "invalid_parameters", times: int = 1, **match: str
    ) -> None:
        self._rules.append(_Rule("refuse", times, match, status=400, code=code, message=message))

    def stall(self, seconds: float, times: int = 1, **match: str) -> None:
        self._rules.append(_Rule("stall", times, match, seconds=seconds))

    def slow(self, seconds: float, times: int = 1, **match: str) -> None:
        self._rules.append(_Rule("slow", times, match, seconds=seconds))

    def garble(self, times: int = 1, **match: str) -> None:
        self._rules.append(_Rule("garble", times, match))

    def _take(self, method: str, path: str) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.times > 0 and _matches(method, path, rule.match):
                    rule.times -= 1
                    return rule
        return None

    def received(self, method: str | None = None, path: str | None = None) -> list[Received]:
        """The requests received, optionally of one method and path pattern."""
        want = {"method": method, "path": path}
        with self._lock:
            return [r for r in self.requests if _matches(r.method, r.path, want)]

    def approve(self, customer_id: str) -> None:
        """Approve a customer's KYB and terms of service (as the sandbox's simulation)."""
        with self._lock:
            self._simulate_kyc_approval({}, customer_id)

    def set_state(self, transfer_id: str, state: str) -> None:
        """Drive a transfer into a documented state (`STATES`), e.g. a refund path."""
        if state not in STATES:
            raise ValueError(f"not a state of the provider: {state}")
        with self._lock:
            transfer = self.transfers[transfer_id]
            transfer["state"], transfer["updated_at"] = state, self._now()

    def _now(self) -> str:
        return self.clock().isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def deposit_to_virtual_account(self, virtual_account_id: str, amount: str) -> None:
        """Simulate a USD deposit at a virtual account: its wallet gets USDB 1:1."""
        with self._lock:
            account = self.virtual_accounts[virtual_account_id]
            self.balances[account["destination"]["bridge_wallet_id"]] += Decimal(amount)

    def close(self) -> None:
        """Wake every stalled answer (the server is going away)."""
        self._closing.set()

    def handle_error(self, request: Any, client_address: Any) -> None:
        _log.debug("fake provider: connection from %s dropped", client_address)

    def respond(
        self, method: str, target: str, headers: httpx.Headers, raw: bytes, port: int | None
    ) -> tuple[int, dict[str, Any] | str]:
        """The status and body (an object is sent as JSON) of one request."""
        parts = urlsplit(target)
        path, query = parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()}
        below = path[len(BASE) :] if path.startswith(BASE + "/") else path
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = ...
        with self._lock:
            self.requests.append(
                Received(method, below, headers, None if body is ... else body, port)
            )
        if headers.get("Api-Key") != self.api_key:
            return 401, {"code": "unauthorized", "message": "Invalid or missing Api-Key"}
        rule = self._take(method, below) or _Rule("none", 0, {})
        if rule.kind == "slow":
            self._closing.wait(rule.seconds)
        if rule.kind in ("fail", "refuse"):
            return rule.status, {"code": rule.code, "message": rule.message}
        try:
            if not path.startswith(BASE + "/"):
                raise _Refused(404, "not_found", "No such route")
            if body is ...:
                raise _Refused(400, "invalid_json", "Request body could not be parsed")
            key = headers.get("Idempotency-Key")
            status, answer = self._handle(method, below, key, query if body is None else body)
        except _Refused as refused:
            status, answer = refused.status, refused.body
        if rule.kind == "stall":
            self._closing.wait(rule.seconds)
        return (200, "<html>upstream hiccup</html>") if rule.kind == "garble" else (status, answer)

    def _handle(self, method: str, path: str, key: str | None, body: Any) -> tuple[int, Any]:
        for verb, pattern, handler in _ROUTES:
            found = pattern.fullmatch(path)
            if found is None or verb != method:
                continue
            with self._lock:
                if method in ("GET", "DELETE"):  # given the query's parameters
                    return 200, handler(self, body or {}, *found.groups())
                if not key:
                    raise _Refused(400, "missing_idempotency_key", "Idempotency-Key is required")
                if not isinstance(body, dict):
                    raise _Refused(400, "invalid_json", "Request body must be a JSON object")
                fingerprint = json.dumps(body, sort_keys=True)
                if (replay := self._replies.get((path, key))) is not None:
                    if self.clock() - replay[2] > IDEMPOTENCY_WINDOW:
                        raise _Refused(422, "idempotency_key_expired", "Idempotency-Key expired")
                    if self.strict_idempotency and replay[0] != fingerprint:
                        raise _Refused(400, "not_truly_idempotent", "Key reused, other body")
                    return 201, replay[1]
                answer = handler(self, body, *found.groups())
                self._replies[(path, key)] = (fingerprint, answer, self.clock())
                return 201, answer
        raise _Refused(404, "not_found", f"No route for {method} {path}")

    def _create_customer(self, body: dict[str, Any]) -> dict[str, Any]:
        _check(body, {"type": "business", "business_legal_name": _TEXT})
        customer = {"id": _id("cust"), **body, "status": "not_started", "created_at": self._now()}
        self.customers[customer["id"]] = customer
        return customer

    def _create_kyc_link(self, body: dict[str, Any]) -> dict[str, Any]:
        _check(body, {"type": ("business", "individual"), "full_name": _TEXT, "email": _TEXT})
        customer = self._create_customer(
            {"type": body["type"], "business_legal_name": body["full_name"]}
        )
        link_id = _id("kyc_link")
        link = {
            "id": link_id,
            "full_name": body["full_name"],
            "email": body["email"],
            "type": body["type"],
            "kyc_link": f"https://bridge.withpersona.com/verify?reference-id={link_id}",
            "tos_link": f"https://dashboard.bridge.xyz/accept-terms-of-service?t={link_id}",
            "kyc_status": "not_started",
            "rejection_reasons": [],
            "tos_status": "pending",
            "customer_id": customer["id"],
            "created_at": self._now(),
        }
        self.kyc_links[link_id] = link
        return link

    def _list_kyc_links(self, query: dict[str, str]) -> dict[str, Any]:
        wanted = query.get("customer_id")
        found = [dict(k) for k in self.kyc_links.values() if wanted in (None, k["customer_id"])]
        return {"count": len(found), "data": found}

    def _get_customer(self, _: dict[str, str], customer_id: str) -> dict[str, Any]:
        return dict(self._customer(customer_id))

    def _simulate_kyc_approval(self, _: dict[str, Any], customer_id: str) -> dict[str, Any]:
        customer = self._customer(customer_id)
        customer["status"] = "active"
        for link in self.kyc_links.values():
            if link["customer_id"] == customer_id:
                link["kyc_status"], link["tos_status"] = "approved", "approved"
        return {
            "success": True,
            "customer_id": customer_id,
            "kyc_status": "approved",
            "message": "Simulated KYC approval processed.",
        }

    def _create_account(self, body: dict[str, Any], customer_id: str) -> dict[str, Any]:
        self._approved(customer_id)
        _check(
            body,
            {
                "account_type": "us",
                "currency": "usd",
                "account_owner_name": _OWNER_NAME,
                "account.account_number": re.compile(r"[0-9]{4,17}"),
                "account.routing_number": re.compile(r"[0-9]{9}"),
                "account.checking_or_savings": ("checking", "savings"),
                "address.street_line_1": _TEXT,
                "address.city": _TEXT,
                "address.postal_code": _TEXT,
                "address.country": re.compile(r"[A-Z]{3}"),
            },
        )
        account, last_4 = dict(body["account"]), body["account"]["account_number"][-4:]
        found = {
            "id": _id("ea"),
            "customer_id": customer_id,
            "active": True,
            "last_4": last_4,
            **{
                k: body.get(k)
                for k in ("account_type", "currency", "bank_name", "account_owner_name")
            },
            "account": {k: v for k, v in account.items() if k != "account_number"},
            "created_at": self._now(),
        }
        self.accounts[found["id"]] = found
        return found

    def _deactivate_account(
        self, _: dict[str, str], customer_id: str, account_id: str
    ) -> dict[str, Any]:
        """``DELETE /customers/{c}/external_accounts/{a}``: the account is deactivated
        (kept, ``active: false``); a transfer naming it is refused from then on."""
        account = self.accounts.get(account_id)
        if account is None or account["customer_id"] != customer_id:
            raise _Refused(404, "not_found", "Unknown external account")
        account["active"] = False
        return account

    def _create_transfer(self, body: dict[str, Any]) -> dict[str, Any]:
        customer_id = str(body.get("on_behalf_of", ""))
        self._approved(customer_id)
        _check(body, {"amount": _DECIMAL, "developer_fee": _DECIMAL})
        amount, fee = Decimal(body["amount"]), Decimal(body["developer_fee"])
        if not 0 <= fee < amount:
            raise _Refused(
                400, "invalid_parameters", "The fee must be below the amount", "developer_fee"
            )
        rails = tuple(self.chains)
        source, destination = body.get("source"), body.get("destination")
        if isinstance(source, dict) and source.get("payment_rail") == "ach_push":  # an on-ramp
            _check(
                body,
                {
                    "source.currency": "usd",
                    "destination.payment_rail": rails,
                    "destination.currency": "usdc",
                    "destination.to_address": _ADDRESS,
                },
            )
            instructions = {
                "payment_rail": "ach_push",
                "amount": f"{amount:f}",
                **_bank("Bridge Ventures Inc"),
                "deposit_message": "BVI" + secrets.token_hex(6).upper(),
            }
        else:  # an off-ramp
            _check(
                body,
                {
                    "source.payment_rail": rails,
                    "source.currency": "usdc",
                    "source.from_address": _ADDRESS,
                    "destination.payment_rail": "ach",
                    "destination.currency": "usd",
                    "destination.external_account_id": _TEXT,
                },
            )
            assert isinstance(source, dict) and isinstance(destination, dict)
            account = self.accounts.get(destination["external_account_id"])
            if account is None or account["customer_id"] != customer_id or not account["active"]:
                raise _Refused(
                    400, "not_found", "Unknown external account", "destination.external_account_id"
                )
            instructions = {
                "payment_rail": source["payment_rail"],
                "amount": f"{amount:f}",
                "currency": "usdc",
                "from_address": source["from_address"],
                "to_address": "0x" + secrets.token_hex(20),
            }
        final = f"{amount - fee:f}"
        transfer: dict[str, Any] = {
            "id": _id("tr"),
            "client_reference_id": body.get("client_reference_id"),
            "state": "awaiting_funds",
            "on_behalf_of": customer_id,
            "amount": f"{amount:f}",
            "developer_fee": f"{fee:f}",
            "source": source,
            "destination": destination,
            "source_deposit_instructions": instructions,
            "receipt": {
                "initial_amount": f"{amount:f}",
                "developer_fee": f"{fee:f}",
                "exchange_fee": "0.0",
                "gas_fee": "0.0",
                "subtotal_amount": final,
                "final_amount": final,
            },
            "created_at": self._now(),
            "updated_at": self._now(),
        }
        self.transfers[transfer["id"]] = transfer
        return transfer

    def _get_transfer(self, _: dict[str, str], transfer_id: str) -> dict[str, Any]:
        if (transfer := self.transfers.get(transfer_id)) is None:
            raise _Refused(404, "not_found", "Transfer not found")
        self._step(transfer)
        return dict(json.loads(json.dumps(transfer)))  # a copy

    def _list_transfers(self, query: dict[str, str]) -> dict[str, Any]:
        """Those updated after ``updated_after_ms``, least recently updated first, at most
        ``limit``. A scan first moves every open transfer one state: its further pages
        follow a full page and ask from a later time."""
        limit = _limit(query)
        after = query.get("updated_after_ms")
        since = int(after) if after is not None and after.isdigit() else -1
        if not self._scanning or since <= self._since:
            for transfer in self.transfers.values():
                self._step(transfer)
        self._since = since
        found = list(self.transfers.values())
        if after is not None:
            if not after.isdigit():
                raise _Refused(400, "invalid_parameters", "updated_after_ms", "updated_after_ms")
            found = [t for t in found if _millis(t["updated_at"]) > int(after)]
        found.sort(key=lambda t: t["updated_at"])  # ties: in the order made
        page = json.loads(json.dumps(found[:limit]))
        self._scanning = len(page) == limit
        return {"count": len(page), "data": page}

    def _customer_transfers(self, query: dict[str, str], customer_id: str) -> dict[str, Any]:
        """A customer's transfers, newest first, after the transfer ``starting_after``."""
        self._customer(customer_id)
        found = [t for t in self.transfers.values() if t["on_behalf_of"] == customer_id][::-1]
        found.sort(key=lambda t: t["created_at"], reverse=True)  # ties: the last made first
        if (after := query.get("starting_after")) is not None:
            ids = [t["id"] for t in found]
            found = found[ids.index(after) + 1 :] if after in ids else []
        page = json.loads(json.dumps(found[: _limit(query)]))
        return {"count": len(page), "data": page}

    def _cancel_transfer(self, _: dict[str, str], transfer_id: str) -> dict[str, Any]:
        """Cancel a transfer that awaits funds; any other is answered as it is."""
        if (transfer := self.transfers.get(transfer_id)) is None:
            raise _Refused(404, "not_found", "Transfer not found")
        if transfer["state"] == "awaiting_funds":
            transfer["state"], transfer["updated_at"] = "canceled", self._now()
        return dict(json.loads(json.dumps(transfer)))

    def _step(self, transfer: dict[str, Any]) -> None:
        """Move an open transfer one state forward (an off-ramp only once paid)."""
        state, source, destination = transfer["state"], transfer["source"], transfer["destination"]
        onramp, deposit = (
            source["payment_rail"] == "ach_push",
            transfer["source_deposit_instructions"],
        )
        if state == "awaiting_funds" and not onramp:
            chain_id = self.chains[source["payment_rail"]]
            if not self.deposit_arrived(chain_id, deposit["to_address"], transfer["amount"]):
                return
        following = _NEXT.get(state)
        if following is None:
            return
        if following == "payment_submitted" and onramp:
            receipt, chain_id = transfer["receipt"], self.chains[destination["payment_rail"]]
            receipt["destination_tx_hash"] = self.payout(
                chain_id, destination["to_address"], receipt["final_amount"]
            )
        transfer["state"], transfer["updated_at"] = following, self._now()

    def _create_wallet(self, body: dict[str, Any], customer_id: str) -> dict[str, Any]:
        self._approved(customer_id)
        _check(body, {"chain": tuple(self.chains)})
        wallet = {
            "id": _id("bw"),
            "chain": body["chain"],
            "address": "0x" + secrets.token_hex(20),
            "customer_id": customer_id,
            "created_at": self._now(),
            "updated_at": self._now(),
        }
        self.wallets[wallet["id"]] = wallet
        self.balances[wallet["id"]] = Decimal(0)
        return wallet

    def _get_wallet(self, _: dict[str, str], customer_id: str, wallet_id: str) -> dict[str, Any]:
        wallet = self.wallets.get(wallet_id)
        if wallet is None or wallet["customer_id"] != customer_id:
            raise _Refused(404, "not_found", "Bridge wallet not found")
        balance = {
            "balance": f"{self.balances[wallet_id]:f}",
            "currency": "usdb",
            "chain": wallet["chain"],
            "contract_address": None,
        }
        return {**wallet, "balances": [balance]}

    def _create_virtual_account(self, body: dict[str, Any], customer_id: str) -> dict[str, Any]:
        customer = self._approved(customer_id)
        _check(
            body,
            {
                "source.currency": "usd",
                "destination.currency": ("usdb", "usdc"),
                "destination.bridge_wallet_id": _TEXT,
            },
        )
        wallet = self.wallets.get(body["destination"]["bridge_wallet_id"])
        if wallet is None or wallet["customer_id"] != customer_id:
            raise _Refused(400, "not_found", "Unknown wallet", "destination.bridge_wallet_id")
        account = {
            "id": _id("va"),
            "status": "activated",
            "customer_id": customer_id,
            "developer_fee_percent": str(body.get("developer_fee_percent") or "0.0"),
            "destination": body["destination"],
            "source_deposit_instructions": {
                "payment_rails": ["ach_push", "wire"],
                **_bank(customer["business_legal_name"]),
            },
        }
        self.virtual_accounts[account["id"]] = account
        return account

    def _customer(self, customer_id: str) -> dict[str, Any]:
        if (customer := self.customers.get(customer_id)) is None:
            raise _Refused(404, "not_found", "Customer not found")
        return customer

    def _approved(self, customer_id: str) -> dict[str, Any]:
        customer = self._customer(customer_id)
        if customer["status"] != "active":
            raise _Refused(403, "customer_not_approved", "The customer has not been approved")
        return customer


_C = r"/customers/([^/]+)"
_ROUTES: list[tuple[str, re.Pattern[str], Callable[..., dict[str, Any]]]] = [
    ("POST", re.compile(r"/kyc_links"), FakeProvider._create_kyc_link),
    ("GET", re.compile(r"/kyc_links"), FakeProvider._list_kyc_links),
    ("POST", re.compile(r"/customers"), FakeProvider._create_customer),
    ("GET", re.compile(_C), FakeProvider._get_customer),
    ("POST", re.compile(_C + "/simulate_kyc_approval"), FakeProvider._simulate_kyc_approval),
    ("GET", re.compile(_C + "/transfers"), FakeProvider._customer_transfers),
    ("POST", re.compile(_C + "/external_accounts"), FakeProvider._create_account),
    ("DELETE", re.compile(_C + r"/external_accounts/([^/]+)"), FakeProvider._deactivate_account),
    ("POST", re.compile(_C + "/wallets"), FakeProvider._create_wallet),
    ("GET", re.compile(_C + r"/wallets/([^/]+)"), FakeProvider._get_wallet),
    ("POST", re.compile(_C + "/virtual_accounts"), FakeProvider._create_virtual_account),
    ("POST", re.compile(r"/transfers"), FakeProvider._create_transfer),
    ("GET", re.compile(r"/transfers"), FakeProvider._list_transfers),
    ("GET", re.compile(r"/transfers/([^/]+)"), FakeProvider._get_transfer),
    ("DELETE", re.compile(r"/transfers/([^/]+)"), FakeProvider._cancel_transfer),
]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real provider answers
    timeout, wbufsize = 60, 1 << 16  # an answer leaves in one write (no delayed-ACK stall)
    server: FakeProvider

    def do_GET(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers, port = httpx.Headers(list(self.headers.items())), self.client_address[1]
        status, body = self.server.respond(self.command, self.path, headers, raw, port)
        kind = "application/json" if isinstance(body, dict) else "text/html"
        data = (json.dumps(body) if isinstance(body, dict) else body).encode()
        try:
            self.send_response(status)
            for name, value in (("Content-Type", kind), ("Content-Length", str(len(data)))):
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up waiting
            self.close_connection = True

    do_POST = do_PUT = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug(format, *args)


@contextmanager
def fake_provider(**options: Any) -> Iterator[FakeProvider]:
    """Serve a `FakeProvider(**options)` on a free loopback port; ``.url`` is its base."""
    provider = FakeProvider(**options)
    threading.Thread(target=provider.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield provider
    finally:
        provider.close()  # stalled answers first: shutting down waits for no request
        provider.shutdown()
        provider.server_close()


def onboard(treasury: Any, org_id: str, fake: FakeProvider, email: str = "ops@example.com") -> None:
    """Onboard an organization of `treasury` (whose fiat provider is `fake`) and approve
    it, as the provider's sandbox simulates: its fiat operations may run after."""
    treasury.admin.start_onboarding(org_id, email=email)
    with treasury.storage.read() as tx:
        row = tx.one("SELECT provider_customer_id FROM organizations WHERE id = ?", (org_id,))
    fake.approve(row["provider_customer_id"])
    assert treasury.admin.onboarding(org_id).status == "approved"


def _matches(method: str, path: str, want: Mapping[str, str | None]) -> bool:
    pattern = want.get("path")
    return want.get("method") in (None, method) and (
        not pattern or fnmatch.fnmatchcase(path, pattern)
    )


def _check(body: dict[str, Any], rules: dict[str, object]) -> None:
    """400 naming the first field (a dotted path) not equal to / in / matching its rule."""
    for key, rule in rules.items():
        value: Any = body
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(rule, re.Pattern):
            ok = isinstance(value, str) and rule.fullmatch(value) is not None
        else:
            ok = value in rule if isinstance(rule, tuple) else value == rule
        if not ok:
            raise _Refused(400, "invalid_parameters", f"Malformed or invalid field: {key}", key)


def _bank(beneficiary: object) -> dict[str, Any]:
    return {
        "currency": "usd",
        "bank_name": "Lead Bank",
        "bank_address": "1801 Main St., Kansas City, MO 64108",
        "bank_routing_number": ROUTING_NUMBER,
        "bank_account_number": f"{secrets.randbelow(10**12):012d}",
        "bank_beneficiary_name": beneficiary,
        "bank_beneficiary_address": "1 Main St, New York, NY 10001",
    }


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


def _limit(query: dict[str, str]) -> int:
    """A list's ``limit``: "default of 10, max of 100"."""
    text = query.get("limit", "10")
    if not text.isdigit() or not 1 <= int(text) <= 100:
        raise _Refused(400, "invalid_parameters", "limit must be 1 to 100", "limit")
    return int(text)


def _millis(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
