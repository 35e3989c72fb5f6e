"""The table of operations: every `/v1` operation, declared once.

Each `Operation` names its method and path (under the ``/v1`` prefix), its input and
response models, its success status, whether it takes an Idempotency-Key, whether it is
public, and the Python method it runs: its name is that method's path on the
organization handle (``"wallets.create"`` is ``org.wallets.create``; public operations
run on the `Treasury` itself). The HTTP blueprint is generated from this table, the
idempotency fingerprint uses the name, and the OpenAPI document and the typed client
read it too; no other module repeats a path or a status.

`invoke` is how a front end runs an operation from raw request parts: an unsupported
chain is a 404 first; every input (header, path, query, body) is validated together, so
one 400 lists every failing field; then the method is called as a Python user would call it: path parameters in
order, then the body, then query parameters and ``idempotency_key`` as keywords.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args, get_origin

import pydantic
from pydantic import BaseModel

from ._infra.idempotency import key_problem
from ._infra.models import (
    Address,
    ChainId,
    Deleted,
    ListOf,
    ListQuery,
    Page,
    PageQuery,
    RowId,
)
from ._infra.validation import field_errors, value_errors
from .balances import TokenBalance
from .bank_accounts import BankAccount, BankAccountRow, CreateBankAccount
from .errors import ValidationError
from .recipients import CreateRecipient, Recipient, UpdateRecipient
from .swaps import Prepared, PrepareSwap
from .test_helpers import Faucet, Funded
from .transactions import Recorded, RecordTransaction, Transaction
from .transactions.models import TransactionsQuery, TxHash
from .transfers import CreateTransfer, Transfer
from .virtual import VirtualAccount, VirtualWallet
from .wallets import CreateWallet, TrackedWalletResponse, TrackWallet, UpdateWallet, Wallet
from .webhooks import CreatedWebhook, CreateWebhook, Delivery, Webhook
from .webhooks.models import DeliveryId
from .yields.models import (
    ArtifactQuery,
    ClaimsQuery,
    YieldArtifact,
    YieldClaim,
    YieldEstimate,
    YieldPeriod,
    YieldQuery,
)

IDEMPOTENCY_HEADER = "Idempotency-Key"
PREFIX = "/v1"  # where the API is served by default, and where clients look for it


@dataclass(frozen=True)
class Operation:
    name: str
    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str
    response: Any  # a `Resource` type, or a union of two (one path, two answers)
    status: int = 200
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    path_params: Mapping[str, Any] = field(default_factory=dict)
    idempotency: Literal["required", "optional"] | None = None
    public: bool = False
    calls: str | None = None  # the method, when another operation's (one method, two paths)
    #: For a list without bound: the method that yields its items in chunks, read from
    #: the store as they are consumed, which a front end may stream (same arguments).
    chunks: str | None = None
    summary: str = ""

    @property
    def method_path(self) -> tuple[str, str]:
        """The handle attribute and method name this operation runs."""
        group, _, method = (self.calls or self.name).partition(".")
        return group, method

    def handler(self, root: Any, *, chunked: bool = False) -> Callable[..., Any]:
        """The bound method on `root` (an organization handle, or the `Treasury`); with
        `chunked`, the method of `chunks`."""
        group, method = self.method_path
        if chunked and self.chunks is not None:
            group, _, method = self.chunks.partition(".")
        function: Callable[..., Any] = getattr(getattr(root, group), method)
        return function


def invoke(
    operation: Operation,
    root: Any,
    *,
    path: Mapping[str, Any],
    query: Mapping[str, Any],
    body: Any,
    headers: Mapping[str, str],
    chunked: bool = False,
) -> Any:
    """Validate every input of a request together (one 400 lists every failing field),
    then run the operation's method on `root` (with `chunked`, its `chunks` method: an
    iterator of lists of items)."""
    if isinstance(path.get("chainId"), int):
        root.require_chain(path["chainId"])  # an unsupported chain is 404 before all else
    problems: list[dict[str, str]] = []
    key = headers.get(IDEMPOTENCY_HEADER)
    if key is None and operation.idempotency == "required":
        problems.append(_problem("header", IDEMPOTENCY_HEADER, "is required"))
    elif key is not None and (message := key_problem(key)) is not None:
        problems.append(_problem("header", IDEMPOTENCY_HEADER, message))
    for name, annotation in operation.path_params.items():
        problems += value_errors(annotation, path.get(name), "path", name)
    parsed_query = _parsed(operation.query, query, "query", problems)
    parsed_body = _parsed(operation.body, body, "body", problems)
    if problems:
        raise ValidationError.fields(problems)
    args: list[Any] = [path[name] for name in operation.path_params]
    if parsed_body is not None:
        args.append(parsed_body)
    kwargs: dict[str, Any] = dict(parsed_query) if parsed_query is not None else {}
    if operation.idempotency is not None:
        kwargs["idempotency_key"] = key
    return operation.handler(root, chunked=chunked)(*args, **kwargs)


def _parsed(
    model: type[BaseModel] | None, data: Any, location: str, problems: list[dict[str, str]]
) -> BaseModel | None:
    if model is None:
        return None
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as error:
        problems += field_errors(error, location)
        return None


def _problem(location: str, field_name: str, message: str) -> dict[str, str]:
    return {"location": location, "field": field_name, "message": message}


def is_integer(annotation: Any) -> bool:
    """Whether a path parameter's type is an integer (``int`` or an annotated ``int``)."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation is int


CHAIN = {"chainId": ChainId}

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "transfers.create", "POST", "/transfers", Transfer, 201, body=CreateTransfer,
        idempotency="required", summary="Move value between a bank, wallets and c0",
    ),
    Operation(
        "transfers.list", "GET", "/transfers", Page[Transfer], query=PageQuery,
        summary="The transfers feed, newest first",
    ),
    Operation(
        "transfers.get", "GET", "/transfers/{id}", Transfer, path_params={"id": uuid.UUID},
        summary="One transfer",
    ),
    Operation(
        "virtual_account.get", "GET", "/virtual-account", VirtualAccount,
        summary="The organization's virtual account (provisioned on first call)",
    ),
    Operation(
        "virtual_wallet.get", "GET", "/virtual-wallet", VirtualWallet,
        summary="The organization's virtual wallet (provisioned on first call)",
    ),
    Operation(
        "wallets.create", "POST", "/wallets", Wallet, 201, body=CreateWallet,
        idempotency="required", summary="Create a custody-managed wallet",
    ),
    Operation(
        "wallets.list", "GET", "/wallets", ListOf[Wallet], query=ListQuery,
        chunks="wallets.chunks", summary="List the organization's wallets",
    ),
    Operation(
        "wallets.track", "POST", "/wallets/track", TrackedWalletResponse, 201,
        body=TrackWallet, idempotency="optional", summary="Track a watch-only wallet",
    ),
    Operation(
        "wallets.get", "GET", "/wallets/{address}", Wallet, path_params={"address": Address},
        summary="One wallet by its address",
    ),
    Operation(
        "wallets.update", "PATCH", "/wallets/{address}", Wallet, body=UpdateWallet,
        path_params={"address": Address}, summary="Rename a wallet",
    ),
    Operation(
        "wallets.delete", "DELETE", "/wallets/{address}", Deleted,
        path_params={"address": Address}, summary="Remove a wallet from the organization",
    ),
    Operation(
        "recipients.create", "POST", "/recipients", Recipient, 201, body=CreateRecipient,
        idempotency="required", summary="Save a recipient address",
    ),
    Operation(
        "recipients.list", "GET", "/recipients", ListOf[Recipient], query=ListQuery,
        chunks="recipients.chunks", summary="List saved recipients",
    ),
    Operation(
        "recipients.update", "PATCH", "/recipients/{id}", Recipient, body=UpdateRecipient,
        path_params={"id": RowId}, summary="Change a recipient's address or label",
    ),
    Operation(
        "recipients.delete", "DELETE", "/recipients/{id}", Deleted, path_params={"id": RowId},
        summary="Remove a recipient",
    ),
    Operation(
        "bank_accounts.create", "POST", "/bank-accounts", BankAccount, 201,
        body=CreateBankAccount, idempotency="optional",
        summary="Register a bank account with the fiat provider",
    ),
    Operation(
        "bank_accounts.list", "GET", "/bank-accounts", ListOf[BankAccountRow],
        summary="List bank accounts",
    ),
    Operation(
        "webhooks.create", "POST", "/webhooks", CreatedWebhook, 201, body=CreateWebhook,
        idempotency="optional", summary="Register a webhook (its secret is shown once)",
    ),
    Operation("webhooks.list", "GET", "/webhooks", ListOf[Webhook], summary="List webhooks"),
    Operation(
        "webhooks.deliveries", "GET", "/webhooks/{id}/deliveries", Page[Delivery],
        query=PageQuery, path_params={"id": RowId},
        summary="A webhook's deliveries, newest first",
    ),
    Operation(
        "webhooks.retry_delivery", "POST", "/webhooks/{id}/deliveries/{deliveryId}/retry",
        Delivery, path_params={"id": RowId, "deliveryId": DeliveryId},
        summary="Send one delivery again now",
    ),
    Operation(
        "webhooks.delete", "DELETE", "/webhooks/{id}", Deleted,
        path_params={"id": RowId}, summary="Delete a webhook",
    ),
    Operation(
        "yield_artifacts.list", "GET", "/yield/artifacts", ListOf[YieldArtifact] | YieldPeriod,
        query=ArtifactQuery, public=True,
        summary="Published yield periods; with periodId, one period whole (public, immutable)",
    ),
    Operation(
        "yields.claims", "GET", "/yield/{address}", ListOf[YieldClaim], query=ClaimsQuery,
        path_params={"address": Address}, summary="An address's yield claims and their status",
    ),
    Operation(
        "swaps.prepare_deposit", "POST", "/{chainId}/deposit/prepare", Prepared,
        body=PrepareSwap, path_params=CHAIN, summary="Steps to deposit a stablecoin into c0",
    ),
    Operation(
        "swaps.prepare_withdraw", "POST", "/{chainId}/withdraw/prepare", Prepared,
        body=PrepareSwap, path_params=CHAIN, summary="Steps to withdraw c0 to a stablecoin",
    ),
    Operation(
        "transactions.record", "POST", "/{chainId}/transactions", Recorded, 201,
        body=RecordTransaction, path_params=CHAIN, idempotency="optional",
        summary="Record a transaction for indexing",
    ),
    Operation(
        "transactions.list", "GET", "/{chainId}/transactions", Page[Transaction],
        query=TransactionsQuery, path_params=CHAIN,
        summary="The organization's tracked transactions on a chain, newest first",
    ),
    Operation(
        "transactions.get", "GET", "/{chainId}/transactions/{hash}", Transaction,
        path_params={**CHAIN, "hash": TxHash}, summary="A tracked transaction and its receipt",
    ),
    Operation(
        "balances.get", "GET", "/{chainId}/balances/{address}", ListOf[TokenBalance],
        path_params={**CHAIN, "address": Address}, summary="Token balances of an address",
    ),
    Operation(
        "yields.estimate", "GET", "/{chainId}/yield/estimate", YieldEstimate,
        query=YieldQuery, path_params=CHAIN, summary="Yield projection of a c0 balance",
    ),
    Operation(
        "yields.get", "GET", "/{chainId}/yield", YieldEstimate, query=YieldQuery,
        path_params=CHAIN, calls="yields.estimate",
        summary="Yield projection of a c0 balance (same as /yield/estimate)",
    ),
    Operation(
        "test_helpers.faucet", "POST", "/test-helpers/{chainId}/faucet", Funded, body=Faucet,
        path_params=CHAIN, summary="Fund an address (only on a chain that can mint)",
    ),
)  # fmt: skip
