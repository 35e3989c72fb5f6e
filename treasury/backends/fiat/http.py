"""``http://`` and ``https://``: the fiat provider's REST API (Bridge, apidocs.bridge.xyz).

The URL is the API's base, e.g. ``https://api.bridge.xyz/v0``. The API key comes from
``api_key=`` or the environment variable ``TREASURY_FIAT_API_KEY`` and travels only in
the ``Api-Key`` header: never in a URL, a repr, a log line or an error message. Every
POST carries an ``Idempotency-Key``: ours, or ``{key}:wallet`` and ``{key}:virtual-account``
where one call of ours takes two of the provider's (a virtual account needs a wallet).

Shapes used (all under the base URL)::

    POST /kyc_links                                  {type: business, full_name, email}
    GET  /kyc_links?customer_id={c}                  kyc_status, tos_status, kyc_link, tos_link
    POST /customers/{c}/simulate_kyc_approval        (the provider's sandbox only)
    POST /customers                                  {type: business, business_legal_name}
    POST /customers/{c}/external_accounts            {account_type: us, account {...}, address {...}}
    DELETE /customers/{c}/external_accounts/{a}      deactivates it (its details replaced)
    POST /transfers                                  {on_behalf_of, amount, developer_fee, source,
                                                      destination, client_reference_id: our key}
    GET  /transfers/{id}                             state, source_deposit_instructions, receipt
    GET  /transfers?updated_after_ms=&limit=         {count, data}: transfers updated since
    DELETE /transfers/{id}                           cancel one that awaits funds
    POST /customers/{c}/wallets                      {chain}
    POST /customers/{c}/virtual_accounts             {source {usd}, destination {usdb, bridge_wallet_id}}
    GET  /customers/{c}/wallets/{w}                  balances [{currency: usdb, balance}]

On-ramp: ``ach_push``/usd → the chain's rail/usdc ``to_address`` (a pushed deposit names no
account: it is matched by its ``deposit_message``); off-ramp: the chain's rail/usdc
``from_address`` → ``ach``/usd ``external_account_id``. The provider knows
payment rails, not chain ids: a chain's rail is part of its configuration
(`Chain.rail`: ``rail`` of ``[chains.<id>]``, else `presets.RAILS`: 1, 11155111 and local
development chains ``ethereum``, 8453 ``base``, 137 ``polygon``, 42161 ``arbitrum``, 10
``optimism``); ``rails=`` overrides it; a chain without a rail is refused before
anything is sent.

Onboarding (apidocs.bridge.xyz/platform/customers/customers/kyclinks): a business
customer is created through a KYC link, whose response carries the customer's id, the
hosted KYB flow (``kyc_link``) and the terms of service (``tos_link``), both to complete
"before they can be approved"; the link needs the business's contact ``email``
(``email=`` or ``contact_email=``; without one, `start_onboarding` is a 400 naming it).
The customer may transact once ``kyc_status`` and ``tos_status`` are both ``approved``
(apidocs.bridge.xyz/api-reference/kyc-links/check-the-status-of-a-kyc-link); until the ToS
is accepted the link shown is the ToS's. The provider's sandbox approves a customer on
``POST /customers/{c}/simulate_kyc_approval`` (apidocs.bridge.xyz/api-reference/sandbox/
simulate-kyc-approval-sandbox-only): `simulate_kyc_approval`.

No list endpoint filters transfers by id, so `transfers` reads one ``GET /transfers/{id}``
each over one keep-alive client; `transfers_updated_since` lists what changed since a time
(``updated_after_ms``, a unix time in milliseconds: "objects updated AFTER the specified
timestamp", apidocs.bridge.xyz/api-reference/transfers/get-all-transfers), at most
``limit`` (100, the provider's maximum) a page. The filter and the id cursors
(``starting_after``) are mutually exclusive (apidocs.bridge.xyz/docs/fetching-transfers),
so the next page asks again from the latest ``updated_at`` seen, less a millisecond (a
transfer seen twice is harmless). A wallet is read under its customer.

Idempotency (apidocs.bridge.xyz/api-reference/introduction/idempotence): the provider
replays a POST's answer for 24 hours; "after the 24-hour window expires, reusing the same
Idempotency-Key will result in a 422". A transfer's retry answered 422 is therefore
looked up by its ``client_reference_id`` (our key) among the customer's transfers
(``GET /customers/{c}/transfers``, paged by ``starting_after``): found, it is the answer;
not found, the first attempt created nothing and the 422 stands (a definite refusal).

Failures become `UpstreamError` here: nothing sent (connection refused, connect or pool
timeout) and HTTP 4xx (with the provider's message) are definite; a request that may
have been received (read or write timeout, dropped connection) is ``ambiguous``, and so
is a POST answered 5xx (a gateway or the provider may have performed it before failing)
or 2xx with an unreadable body (it was performed).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Self
from urllib.parse import quote, urlsplit

import httpx

from ...errors import NotFound, UpstreamError, ValidationError
from ..chain.presets import RAILS
from .base import (
    APPROVED,
    BankDeposit,
    ExternalAccount,
    FiatContext,
    FiatProvider,
    OffRamp,
    Onboarding,
    OnRamp,
    ProviderTransfer,
    VirtualAccount,
)

__all__ = ["API_KEY_ENV", "RAILS", "HttpFiat"]

#: The environment variable that holds the provider's API key.
API_KEY_ENV = "TREASURY_FIAT_API_KEY"
#: Transfers asked for in one page of the provider's list (its maximum).
PAGE = 100
_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
_log = logging.getLogger(__name__)


class _Secret:
    """A string that never shows itself in a repr."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<secret>"


class HttpFiat(FiatProvider):
    """The provider at `url`. Pass `client` to reuse or instrument an `httpx.Client`
    (its own timeouts then apply, and the plugin does not close it)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        client: httpx.Client | None = None,
        timeout: httpx.Timeout = _TIMEOUT,
        rails: Mapping[int, str] | None = None,
        wallet_chain: str = "ethereum",
        contact_email: str | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the fiat provider's URL must be http(s)://host/base-path")
        if parts.username or parts.password or parts.query:
            raise ValueError(
                f"put the fiat provider's API key in {API_KEY_ENV} (or api_key=), not in its URL"
            )
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
        if not key.strip():
            raise ValueError(f"no API key for the fiat provider: set {API_KEY_ENV}")
        self._key = _Secret(key.strip())
        self._base = url.rstrip("/")
        port = f":{parts.port}" if parts.port else ""
        self._where = f"fiat provider at {parts.scheme}://{parts.hostname}{port}"
        self._rails = dict(rails or {})
        self._context: FiatContext | None = None
        self._wallet_chain = wallet_chain
        self._contact_email = contact_email
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=timeout)

    @classmethod
    def from_url(cls, url: str) -> Self:
        return cls(url)

    def __repr__(self) -> str:
        return f"HttpFiat({self._base!r})"

    def bind(self, context: FiatContext) -> None:
        self._context = context  # the chains, whose configuration names their rails

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    # -- the FiatProvider interface ------------------------------------------------------

    def create_customer(self, name: str, *, idempotency_key: str) -> str:
        body = {"type": "business", "business_legal_name": name}
        return _text(self._post("/customers", body, idempotency_key), "id", self._where)

    def start_onboarding(
        self, name: str, *, idempotency_key: str, email: str | None = None
    ) -> Onboarding:
        contact = email or self._contact_email
        if not contact:
            raise ValidationError.field(
                "body", "email", "the fiat provider's KYB link needs the business's contact email"
            )
        body = {"type": "business", "full_name": name, "email": contact}
        return self._onboarding(self._post("/kyc_links", body, idempotency_key))

    def customer_status(self, customer_id: str) -> Onboarding:
        found = self._request("GET", "/kyc_links", None, None, {"customer_id": customer_id})
        links = found.get("data")
        if not isinstance(links, list):
            raise UpstreamError(f"{self._where} answered a malformed list of KYC links")
        mine = [link for link in links if isinstance(link, dict)]
        if not mine:  # a customer made otherwise: its own status ("active" may transact)
            customer = self._get(f"/customers/{_segment(customer_id)}")
            status = _text(customer, "status", self._where, ambiguous=False)
            return Onboarding(customer_id, APPROVED if status == "active" else status)
        return self._onboarding(mine[0])

    def simulate_kyc_approval(self, customer_id: str) -> None:
        """Approve a customer in the provider's sandbox (not available in production)."""
        path = f"/customers/{_segment(customer_id)}/simulate_kyc_approval"
        self._post(path, {}, f"simulate-kyc-approval-{customer_id}")

    def register_external_account(
        self, customer_id: str, account: ExternalAccount, *, idempotency_key: str
    ) -> str:
        address = {
            "street_line_1": account.street_line_1,
            "street_line_2": account.street_line_2,
            "city": account.city,
            "state": account.state,
            "postal_code": account.postal_code,
            "country": account.country,
        }
        body = {
            "account_type": "us",
            "currency": account.currency,
            "bank_name": account.bank_name,
            "account_owner_name": account.account_owner_name,
            "account_owner_type": account.account_owner_type,
            "business_name": account.business_name,
            "account": {
                "account_number": account.account_number,
                "routing_number": account.routing_number,
                "checking_or_savings": account.checking_or_savings,
            },
            "address": _present(address),
        }
        path = f"/customers/{_segment(customer_id)}/external_accounts"
        return _text(self._post(path, _present(body), idempotency_key), "id", self._where)

    def deactivate_external_account(self, customer_id: str, account_id: str) -> None:
        path = f"/customers/{_segment(customer_id)}/external_accounts/{_segment(account_id)}"
        self._request("DELETE", path, None, None)

    def create_transfer(
        self, customer_id: str, request: OnRamp | OffRamp, *, idempotency_key: str
    ) -> ProviderTransfer:
        rail = self._rail(request.chain_id)
        body: dict[str, Any] = {
            "client_reference_id": idempotency_key,
            "on_behalf_of": customer_id,
            "amount": request.amount,
            "developer_fee": request.developer_fee,
        }
        if isinstance(request, OnRamp):
            body["source"] = {"payment_rail": "ach_push", "currency": "usd"}
            body["destination"] = {
                "payment_rail": rail,
                "currency": "usdc",
                "to_address": request.to_address,
            }
        else:
            body["source"] = {
                "payment_rail": rail,
                "currency": "usdc",
                "from_address": request.from_address,
            }
            body["destination"] = {
                "payment_rail": "ach",
                "currency": "usd",
                "external_account_id": request.external_account_id,
            }
        try:
            created = self._post("/transfers", body, idempotency_key)
        except _WindowPassed as passed:  # found: the first attempt made it; else none did
            found = self._by_reference(customer_id, idempotency_key)
            if found is None:
                raise UpstreamError(passed.message) from None
            created = found
        answer = self._transfer(created, ambiguous=True)
        if isinstance(request, OffRamp) and answer.deposit_address is None:
            raise UpstreamError(
                f"{self._where} gave the off-ramp no deposit address", ambiguous=True
            )
        return answer

    def transfers(self, ids: Sequence[str]) -> list[ProviderTransfer]:
        found = []
        for transfer_id in ids:
            answer = self._transfer(self._get(f"/transfers/{_segment(transfer_id)}"))
            if answer.id != transfer_id:
                raise UpstreamError(
                    f"{self._where} answered transfer {answer.id!r} for {transfer_id!r}"
                )
            found.append(answer)
        return found

    def transfers_updated_since(self, when: datetime) -> Iterator[list[ProviderTransfer]]:
        after = int(when.timestamp() * 1000)
        while True:
            query = {"updated_after_ms": str(after), "limit": str(PAGE)}
            found = self._request("GET", "/transfers", None, None, query)
            rows = _listed(found, self._where)
            yield [self._transfer(row) for row in rows]
            if len(rows) < PAGE:
                return
            latest = max(_millis(row.get("updated_at"), self._where) for row in rows)
            if latest - 1 <= after:  # a page of one instant: nothing more can be told apart
                return
            after = latest - 1

    def cancel_transfer(self, transfer_id: str) -> ProviderTransfer | None:
        path = f"/transfers/{_segment(transfer_id)}"
        return self._transfer(self._request("DELETE", path, None, None))

    def create_virtual_account(self, customer_id: str, *, idempotency_key: str) -> VirtualAccount:
        customer = _segment(customer_id)
        wallet = self._post(
            f"/customers/{customer}/wallets",
            {"chain": self._wallet_chain},
            f"{idempotency_key}:wallet",
        )
        wallet_id = _text(wallet, "id", self._where, ambiguous=True)
        body = {
            "source": {"currency": "usd"},
            "destination": {
                "payment_rail": self._wallet_chain,
                "currency": "usdb",
                "bridge_wallet_id": wallet_id,
            },
            "developer_fee_percent": "0.0",
        }
        path = f"/customers/{customer}/virtual_accounts"
        answer = self._post(path, body, f"{idempotency_key}:virtual-account")
        instructions = answer.get("source_deposit_instructions")
        if not isinstance(instructions, dict):
            raise UpstreamError(f"{self._where} gave no deposit instructions", ambiguous=True)
        return VirtualAccount(
            id=_text(answer, "id", self._where, ambiguous=True),
            customer_id=str(answer.get("customer_id") or customer_id),
            wallet_id=wallet_id,
            developer_fee_percent=str(answer.get("developer_fee_percent") or "0.0"),
            deposit=self._bank(instructions, ambiguous=True),
        )

    def wallet_balance(self, customer_id: str, wallet_id: str) -> str:
        answer = self._get(f"/customers/{_segment(customer_id)}/wallets/{_segment(wallet_id)}")
        balances = answer.get("balances") or []
        if not isinstance(balances, list):
            raise UpstreamError(f"{self._where} answered a malformed wallet")
        for entry in balances:
            if isinstance(entry, dict) and str(entry.get("currency", "")).lower() == "usdb":
                return _decimal(entry.get("balance"), self._where)
        return "0"

    # -- shapes ----------------------------------------------------------------------------

    def _onboarding(self, link: dict[str, Any]) -> Onboarding:
        """A KYC link as where onboarding stands: approved once both the KYB and the ToS
        are; the ToS link is shown until it is accepted."""
        customer = _text(link, "customer_id", self._where)
        kyc, tos = str(link.get("kyc_status") or "not_started"), str(link.get("tos_status") or "")
        url = link.get("tos_link") if tos != APPROVED else link.get("kyc_link")
        status = kyc if tos == APPROVED or kyc != APPROVED else "incomplete"
        return Onboarding(customer, status, str(url) if url else None)

    def _by_reference(self, customer_id: str, reference: str) -> dict[str, Any] | None:
        """The customer's transfer made under our `reference` (`client_reference_id`), by
        its list of transfers, newest first, page by page."""
        path, query = f"/customers/{_segment(customer_id)}/transfers", {"limit": str(PAGE)}
        while True:
            rows = _listed(self._request("GET", path, None, None, query), self._where)
            for row in rows:
                if row.get("client_reference_id") == reference:
                    return row
            if len(rows) < PAGE or not isinstance(rows[-1].get("id"), str):
                return None
            query = {"limit": str(PAGE), "starting_after": rows[-1]["id"]}

    def _rail(self, chain_id: int) -> str:
        """``rails=``, else the rail of the chain's configuration (`Chain.rail`), else the
        default rail of its chain id (unbound: no configuration to read)."""
        rail = self._rails.get(chain_id)
        if rail is None and self._context is not None:
            try:
                rail = self._context.chain(chain_id).rail
            except NotFound:  # not a configured chain
                rail = None
        elif rail is None:
            rail = RAILS.get(chain_id)
        if rail is None:
            raise UpstreamError(f"the fiat provider has no payment rail for chain {chain_id}")
        return rail

    def _transfer(self, body: dict[str, Any], *, ambiguous: bool = False) -> ProviderTransfer:
        instructions = body.get("source_deposit_instructions")
        receipt = body.get("receipt")
        receipt = receipt if isinstance(receipt, dict) else {}
        bank, address = None, None
        if isinstance(instructions, dict):
            if instructions.get("bank_routing_number") is not None:
                bank = self._bank(instructions, ambiguous=ambiguous)
            elif instructions.get("to_address"):
                address = str(instructions["to_address"])
        final = receipt.get("final_amount")
        tx_hash = receipt.get("destination_tx_hash")
        return ProviderTransfer(
            id=_text(body, "id", self._where, ambiguous=ambiguous),
            state=_text(body, "state", self._where, ambiguous=ambiguous),
            bank_deposit=bank,
            deposit_address=address,
            destination_tx_hash=str(tx_hash) if tx_hash else None,
            final_amount=_decimal(final, self._where, ambiguous) if final is not None else None,
            updated_at=_moment(body.get("updated_at")),
        )

    def _bank(self, found: dict[str, Any], *, ambiguous: bool) -> BankDeposit:
        routing = str(found.get("bank_routing_number") or "")
        if routing.isdigit() and len(routing) < 9:  # sent as a JSON number: zeros lost
            routing = routing.zfill(9)
        account = str(found.get("bank_account_number") or "")
        if not (routing.isdigit() and len(routing) == 9 and account):
            raise UpstreamError(f"{self._where} gave malformed bank details", ambiguous=ambiguous)
        return BankDeposit(
            bank_name=str(found.get("bank_name") or ""),
            bank_address=str(found.get("bank_address") or ""),
            routing_number=routing,
            account_number=account,
            beneficiary_name=str(found.get("bank_beneficiary_name") or ""),
            beneficiary_address=str(found.get("bank_beneficiary_address") or ""),
            message=str(found.get("deposit_message") or ""),
        )

    # -- HTTP ------------------------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any], key: str) -> dict[str, Any]:
        return self._request("POST", path, body, key)

    def _get(self, path: str) -> dict[str, Any]:
        return self._request("GET", path, None, None)

    def _request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        key: str | None,
        query: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The JSON object the provider answered, or `UpstreamError` (`_WindowPassed`: a
        POST answered 422, as after the idempotency window)."""
        headers = {"Api-Key": self._key.value, "Accept": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        try:
            response = self._client.request(
                method, self._base + path, json=body, headers=headers, params=query
            )
        except _NOT_SENT as e:
            raise UpstreamError(f"{self._where} unreachable ({type(e).__name__})") from None
        except httpx.HTTPError as e:  # sent, perhaps received and performed
            raise UpstreamError(
                f"{self._where} did not answer {method} {path} ({type(e).__name__})",
                ambiguous=True,
            ) from None
        status = response.status_code
        _log.debug("%s %s -> %s", method, path, status)
        if status >= 500:  # a write may have been performed before the failure
            raise UpstreamError(
                f"{self._where} failed {method} {path}: HTTP {status}", ambiguous=method != "GET"
            )
        if status == 422 and method == "POST":
            raise _WindowPassed(
                f"{self._where} refused {method} {path}: {self._reason(response)} (HTTP {status})"
            )
        if status >= 400:
            raise UpstreamError(
                f"{self._where} refused {method} {path}: {self._reason(response)} (HTTP {status})"
            )
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise UpstreamError(
                f"{self._where} answered {method} {path} with malformed JSON",
                ambiguous=method == "POST",
            )
        return answer

    def _reason(self, response: httpx.Response) -> str:
        """The provider's message and code, scrubbed of our key."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return response.reason_phrase or "no reason given"
        message = str(body.get("message") or body.get("error") or "no reason given")
        code = body.get("code")
        source = body.get("source")
        where = source.get("key") if isinstance(source, dict) else None
        text = f"{message} [{code}]" if code else message
        text = f"{text} at {where}" if where else text
        return text.replace(self._key.value, "<secret>")[:500]


class _WindowPassed(UpstreamError):
    """A POST answered 422: its Idempotency-Key is past the provider's 24 h window."""


def _listed(found: dict[str, Any], where: str) -> list[dict[str, Any]]:
    rows = found.get("data")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise UpstreamError(f"{where} answered a malformed list")
    return rows


def _moment(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def _millis(value: object, where: str) -> int:
    try:
        return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise UpstreamError(f"{where} answered a malformed updated_at: {value!r}") from None


def _segment(value: str) -> str:
    return quote(value, safe="")


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _text(body: dict[str, Any], name: str, where: str, *, ambiguous: bool = True) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise UpstreamError(f"{where} answered without a {name}", ambiguous=ambiguous)
    return value


_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def _decimal(value: object, where: str, ambiguous: bool = False) -> str:
    text = str(value) if value is not None else ""
    try:
        ok = _DECIMAL.fullmatch(text) is not None and Decimal(text).is_finite()
    except InvalidOperation:
        ok = False
    if not ok:
        raise UpstreamError(
            f"{where} answered an amount that is not a decimal: {text[:40]!r}", ambiguous=ambiguous
        )
    return text
