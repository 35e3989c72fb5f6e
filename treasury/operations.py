"""The table of operations: every `/v1` operation, declared once.

Each `Operation` names its method and path (under the ``/v1`` prefix) with the path's
parameters, its input and response models, its success status, whether it takes an
Idempotency-Key, its HTTP caching, and the Python method it runs: `runs` takes an
organization's handle and gives that method (``lambda org: org.wallets.create``), or
`runs_public` takes the `Treasury` for a public operation. The name is the operation's
own (``"wallets.create"``). The HTTP blueprint is generated from this table, the
idempotency fingerprint uses the name, and the OpenAPI document and the typed client
read it too; no other module repeats a path or a status.

Each operation requires a scope of the API key (`scope`: ``read``, ``payments``,
``approve`` or ``admin``), given by DESIGN's rule (`scope_by_rule`) unless a row says
otherwise; the organization's handle checks it before anything else. Every operation
whose method is not GET changes state (`mutating`): each call appends one audit event.

One method and path may be two operations when a query parameter selects the second
(`selected_by`): ``GET /yield/artifacts`` lists, and with ``periodId`` answers one period.

`invoke` is how a front end runs an operation from raw request parts: an unsupported
chain is a 404 first; every input (header, path, query, body) is validated together, so
one 400 lists every failing field; then the method is called as a Python user would call
it: path parameters in order, then the body, then query parameters and
``idempotency_key`` as keywords.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, Protocol, TypeVar, cast, get_args, get_origin

import pydantic
from pydantic import BaseModel

from ._infra.idempotency import key_problem
from ._infra.models import (
    Address,
    ChainId,
    CsvTable,
    Deleted,
    ListOf,
    ListQuery,
    Page,
    PageQuery,
    RowId,
)
from ._infra.validation import field_errors, valid_value, value_errors
from ._records.transactions import TxHash
from .admin.scopes import ApiScope
from .audit import AuditEvent, AuditEvents
from .balances import Balances, TokenBalance
from .bank_accounts import BankAccount, BankAccountRow, BankAccounts, CreateBankAccount
from .bank_accounts.models import BankAccountRef, UpdateBankAccount
from .books import (
    Break,
    Ledger,
    LedgerBalances,
    Reconciliation,
    ReconciliationGroup,
    ReconciliationRun,
    Statement,
    Statements,
)
from .books.models import (
    STATEMENT_CSV,
    BreaksQuery,
    LedgerQuery,
    ResolveBreak,
    RunReconciliation,
    StatementLine,
    StatementQuery,
)
from .errors import ValidationError
from .policy import Policies, Policy, SetPolicy
from .recipients import CreateRecipient, Recipient, Recipients, UpdateRecipient
from .swaps import Prepared, PrepareSwap, Swaps
from .test_helpers import Faucet, Funded, TestHelpers
from .transactions import Recorded, RecordTransaction, Transaction, Transactions
from .transactions.models import TransactionsQuery
from .transfers import CreateTransfer, Transfer, Transfers
from .transfers.models import EXPORT, CreateTransferBatch, ExportQuery, TransferBatch
from .virtual import VirtualAccount, VirtualAccountGroup, VirtualWallet, VirtualWalletGroup
from .wallets import (
    CreateWallet,
    TrackedWalletResponse,
    TrackWallet,
    UpdateWallet,
    Wallet,
    Wallets,
)
from .webhooks import CreatedWebhook, CreateWebhook, Delivery, Webhook, Webhooks
from .webhooks.models import DeliveryId
from .yields import Yields
from .yields.artifacts import YieldArtifacts
from .yields.models import (
    ArtifactQuery,
    ArtifactsQuery,
    ClaimsQuery,
    YieldArtifact,
    YieldClaim,
    YieldEstimate,
    YieldPeriod,
    YieldQuery,
)

IDEMPOTENCY_HEADER = "Idempotency-Key"
PREFIX = "/v1"  # where the API is served by default, and where clients look for it


R = TypeVar("R", bound=BaseModel)
PATH_PARAM = re.compile(r"\{(\w+)\}")  # a parameter in a path: ``{name}``


class Handle(Protocol):
    """What an organization's operations run on: its handle (`OrganizationHandle`)."""

    @property
    def audit_events(self) -> AuditEvents: ...
    @property
    def transfers(self) -> Transfers: ...
    @property
    def virtual_account(self) -> VirtualAccountGroup: ...
    @property
    def virtual_wallet(self) -> VirtualWalletGroup: ...
    @property
    def wallets(self) -> Wallets: ...
    @property
    def recipients(self) -> Recipients: ...
    @property
    def bank_accounts(self) -> BankAccounts: ...
    @property
    def webhooks(self) -> Webhooks: ...
    @property
    def yields(self) -> Yields: ...
    @property
    def swaps(self) -> Swaps: ...
    @property
    def transactions(self) -> Transactions: ...
    @property
    def balances(self) -> Balances: ...
    @property
    def test_helpers(self) -> TestHelpers: ...
    @property
    def policy(self) -> Policies: ...
    @property
    def ledger(self) -> Ledger: ...
    @property
    def statements(self) -> Statements: ...
    @property
    def reconciliation(self) -> ReconciliationGroup: ...
    def require_chain(self, chain_id: int) -> None: ...


class Public(Protocol):
    """What a public operation runs on: the `Treasury`, without an organization."""

    @property
    def yield_artifacts(self) -> YieldArtifacts: ...


@dataclass(frozen=True)
class PathParam:
    """A parameter of an operation's path: its name in the path, its type, and whether it
    is a chain id (a chain that is not configured is a 404 before any input is checked)."""

    name: str
    type: Any
    chain: bool = False

    @property
    def integer(self) -> bool:
        """Whether its type is an integer (``int`` or an annotated ``int``)."""
        kind = get_args(self.type)[0] if get_origin(self.type) is Annotated else self.type
        return kind is int

    def canonical(self, value: Any) -> str | None:
        """`value` as the API answers it, as its type validates it: an integer without
        leading zeros, an address or a hash in lowercase, a uuid lowercase with hyphens;
        None when it is not a value of its type (it names no object)."""
        parsed = valid_value(self.type, value)
        if parsed is None:
            return None
        text = str(parsed)
        return text.lower() if text.startswith("0x") else text


class _Reached:
    """A stand-in root that remembers the attributes an accessor reaches."""

    def __init__(self, path: tuple[str, ...] = ()) -> None:
        self.path = path

    def __getattr__(self, name: str) -> _Reached:
        return _Reached((*self.path, name))


@dataclass(frozen=True)
class Operation(Generic[R]):
    name: str
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str
    response: type[R]
    #: The method it runs, from an organization's handle (None: a public operation).
    runs: Callable[[Handle], Callable[..., R]] | None = None
    #: The method a public operation runs, from the `Treasury` (no API key).
    runs_public: Callable[[Public], Callable[..., R]] | None = None
    status: int = 200
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    #: The parameters of `path`, in the order they appear there.
    path_params: tuple[PathParam, ...] = ()
    idempotency: Literal["required", "optional"] | None = None
    #: For a list without bound: the method that yields its items in chunks, read from
    #: the store as they are consumed, which a front end may stream (same arguments).
    chunks: Callable[[Handle], Callable[..., Iterator[list[Any]]]] | None = None
    #: ``"forever"``: the answer never changes once made (a published yield period):
    #: HTTP serves it with a strong ETag, cached for a year, 304 on a match.
    cache: Literal["forever"] | None = None
    #: The query parameter (as sent) that selects this operation over the one of the
    #: same method and path without it.
    selected_by: str | None = None
    #: An answer written as CSV (``text/csv``): the items of `chunks`, one row each.
    csv: CsvTable[Any] | None = None
    #: The media type of the ``Accept`` header that selects this operation over the one
    #: of the same method and path without it (``"text/csv"``: the same resource as CSV).
    accept: str | None = None
    summary: str = ""
    #: The scope an API key needs for it; None in a row: DESIGN's rule (`scope_by_rule`).
    #: A public operation needs none.
    scope: ApiScope | None = None
    #: An idempotent operation whose answer may hold a secret shown once: whether this
    #: answer does, so the idempotency store keeps its outcome sealed (encrypted) at rest.
    sealed: Callable[[R], bool] | None = None

    def __post_init__(self) -> None:
        named = tuple(PATH_PARAM.findall(self.path))
        if named != tuple(param.name for param in self.path_params):
            raise ValueError(f"{self.name}: path_params must be {named}, in that order")
        if (self.runs is None) == (self.runs_public is None):
            raise ValueError(f"{self.name}: give exactly one of runs and runs_public")
        if self.csv is not None and self.chunks is None:
            raise ValueError(f"{self.name}: a CSV answer is written from chunks")
        if self.sealed is not None and self.idempotency is None:
            raise ValueError(f"{self.name}: only an outcome stored under a key is sealed")
        if self.scope is None and not self.public:
            object.__setattr__(self, "scope", scope_by_rule(self.method, self.path))

    @property
    def public(self) -> bool:
        """Whether it runs without an API key (on the `Treasury`)."""
        return self.runs_public is not None

    @property
    def mutating(self) -> bool:
        """Whether it changes state (every method but GET): each call is audited."""
        return self.method != "GET"

    @property
    def object_type(self) -> str:
        """What its audit events name as their object: its group, singular
        (``"transfers.create"``: ``"transfer"``)."""
        group = self.name.partition(".")[0]
        return group.removesuffix("s")

    @functools.cached_property
    def object_param(self) -> tuple[str, int] | None:
        """The parameter of its path that names its object (the first but a chain id),
        and its place among the path's parameters; None without one."""
        params = enumerate(self.path_params)
        return next(((param.name, at) for at, param in params if not param.chain), None)

    @functools.cached_property
    def object_key(self) -> str:
        """The field of its group's objects that identifies one (``id`` but where a path
        of the group names another: a wallet's ``address``, a transaction's ``hash``)."""
        return _object_keys().get(self.name.partition(".")[0], "id")

    def object_id(self, path: Sequence[Any] | Mapping[str, Any], result: Any = None) -> str | None:
        """The id of the object a call acts on, for its audit event, as the API answers
        it: its `object_param` from `path` (the call's values, in order or by name;
        `PathParam.canonical`: ``007`` is ``7``, an address lowercase), else its
        `object_key` read from `result` (a new wallet's ``address``, a new recipient's
        ``id``), also in a model the result holds."""
        named = self.object_param
        if named is not None:
            name, index = named
            if isinstance(path, Mapping):
                value = path.get(name)
            else:
                value = path[index] if len(path) > index else None
            if value is not None:
                return self.path_params[index].canonical(value)
        if result is None:
            return None
        key = self.object_key
        found = getattr(result, key, None)  # the result itself first, else a model it holds
        if found is None:
            holders = (v for v in vars(result).values() if isinstance(v, BaseModel))
            found = next(
                (getattr(h, key) for h in holders if getattr(h, key, None) is not None), None
            )
        return None if found is None else str(found)

    @property
    def method_path(self) -> tuple[str, ...]:
        """The attributes its method is reached by from its root (``("transfers",
        "create")``): its name in Python."""
        return cast(_Reached, self.handler(cast(Handle, _Reached()))).path

    @property
    def chunks_path(self) -> tuple[str, ...] | None:
        """Like `method_path`, for its `chunks` method (None without one)."""
        if self.chunks is None:
            return None
        return cast(_Reached, self.chunks(cast(Handle, _Reached()))).path

    def handler(self, root: Handle | Public) -> Callable[..., R]:
        """The bound method on `root`: an organization's handle, or for a public
        operation the `Treasury`."""
        if self.runs_public is not None:
            return self.runs_public(cast(Public, root))
        assert self.runs is not None
        return self.runs(cast(Handle, root))


#: The resources whose every operation needs ``admin``, and those whose changes need
#: ``payments`` (the first segment of the path after a chain id).
_ADMIN_ONLY = frozenset({"webhooks", "policy", "audit-events"})
_PAYMENTS = frozenset(
    {"wallets", "recipients", "bank-accounts", "transfers", "transactions", "deposit", "withdraw"}
)


def scope_by_rule(method: str, path: str) -> ApiScope:
    """DESIGN's rule: ``read`` for every GET but those of webhooks, deliveries, policy and
    the audit log; ``approve`` to approve or reject; ``payments`` for the other changes of
    wallets, recipients, bank accounts, transfers, transactions and prepare; else ``admin``."""
    segments = [part for part in path.split("/") if part and part != "{chainId}"]
    resource = segments[0] if segments else ""
    if resource in _ADMIN_ONLY:
        return "admin"
    if method == "GET":
        return "read"
    if segments[-1] in ("approve", "reject"):
        return "approve"
    return "payments" if resource in _PAYMENTS else "admin"


def invoke(
    operation: Operation[Any],
    root: Handle | Public,
    *,
    path: Mapping[str, Any],
    query: Mapping[str, Any],
    body: Any,
    headers: Mapping[str, str],
    chunked: bool = False,
) -> Any:
    """Validate every input of a request together (one 400 lists every failing field),
    then run the operation's method on `root` (with `chunked` and an operation that has
    `chunks`, that method: an iterator of lists of items)."""
    for param in operation.path_params:
        if param.chain and isinstance(path.get(param.name), int):  # 404 before all else
            cast(Handle, root).require_chain(path[param.name])
    problems: list[dict[str, str]] = []
    key = headers.get(IDEMPOTENCY_HEADER)
    if key is None and operation.idempotency == "required":
        problems.append(_problem("header", IDEMPOTENCY_HEADER, "is required"))
    elif key is not None and (message := key_problem(key)) is not None:
        problems.append(_problem("header", IDEMPOTENCY_HEADER, message))
    for param in operation.path_params:
        problems += value_errors(param.type, path.get(param.name), "path", param.name)
    parsed_query = _parsed(operation.query, query, "query", problems)
    parsed_body = _parsed(operation.body, body, "body", problems)
    if problems:
        raise ValidationError.fields(problems)
    args: list[Any] = [path[param.name] for param in operation.path_params]
    if parsed_body is not None:
        args.append(parsed_body)
    kwargs: dict[str, Any] = dict(parsed_query) if parsed_query is not None else {}
    if operation.idempotency is not None:
        kwargs["idempotency_key"] = key
    if chunked and operation.chunks is not None:
        return operation.chunks(cast(Handle, root))(*args, **kwargs)
    return operation.handler(root)(*args, **kwargs)


@functools.cache
def _object_keys() -> dict[str, str]:
    """Each group's object parameter: the first path parameter (but a chain id) of its
    operations (``wallets``: ``address``; ``transactions``: ``hash``)."""
    keys: dict[str, str] = {}
    for operation in OPERATIONS:
        named = [param.name for param in operation.path_params if not param.chain]
        if named:
            keys.setdefault(operation.name.partition(".")[0], named[0])
    return keys


def routes() -> list[list[Operation[Any]]]:
    """The operations of the table grouped by method and path, in table order: one HTTP
    route each (two operations when a query parameter selects the second)."""
    grouped: dict[tuple[str, str], list[Operation[Any]]] = {}
    for operation in OPERATIONS:
        grouped.setdefault((operation.method, operation.path), []).append(operation)
    return list(grouped.values())


def selected(
    operations: Sequence[Operation[Any]],
    query: Mapping[str, Any],
    accepts: Callable[[str], bool] = lambda media_type: False,
) -> Operation[Any]:
    """Of the operations of one method and path, the one that `query` selects (the first
    whose `selected_by` parameter it holds) or the request's ``Accept`` header prefers
    (`accepts(media_type)`: whether it prefers that type to JSON), else the one selected
    by neither."""
    default = next(op for op in operations if op.selected_by is None and op.accept is None)
    chosen = next((op for op in operations if op.selected_by in query), None)
    chosen = chosen or next(
        (op for op in operations if op.accept is not None and accepts(op.accept)), None
    )
    return chosen or default


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


CHAIN = PathParam("chainId", ChainId, chain=True)
ADDRESS = PathParam("address", Address)
ROW_ID = PathParam("id", RowId)
TRANSFER_ID = PathParam("id", uuid.UUID)


def _always(answer: object) -> bool:
    return True


def _deposit_instructions(transfer: Transfer) -> bool:
    """An on-ramp's deposit instructions hold the provider's account number."""
    return transfer.deposit_instructions is not None


def _any_deposit_instructions(batch: TransferBatch) -> bool:
    return any(item.transfer is not None and _deposit_instructions(item.transfer) for item in batch)


OPERATIONS: tuple[Operation[Any], ...] = (
    Operation(
        "transfers.create", "POST", "/transfers", Transfer, lambda org: org.transfers.create,
        status=201, body=CreateTransfer, idempotency="required", sealed=_deposit_instructions,
        summary="Move value between a bank, wallets and c0",
    ),
    Operation(
        "transfers.create_batch", "POST", "/transfers/batch", TransferBatch,
        lambda org: org.transfers.create_batch, body=CreateTransferBatch,
        idempotency="required", sealed=_any_deposit_instructions,
        summary="A payout run: up to 1,000 transfers, each judged as POST /transfers (200, per item)",
    ),
    Operation(
        "transfers.list", "GET", "/transfers", Page[Transfer], lambda org: org.transfers.list,
        query=PageQuery, summary="The transfers feed, newest first",
    ),
    Operation(
        "transfers.export", "GET", "/transfers/export", ListOf[Transfer],
        lambda org: org.transfers.export, query=ExportQuery,
        chunks=lambda org: org.transfers.export_chunks, csv=EXPORT,
        summary="The feed between two times as CSV, oldest first",
    ),
    Operation(
        "transfers.get", "GET", "/transfers/{id}", Transfer, lambda org: org.transfers.get,
        path_params=(TRANSFER_ID,), summary="One transfer",
    ),
    Operation(
        "transfers.approve", "POST", "/transfers/{id}/approve", Transfer,
        lambda org: org.transfers.approve, path_params=(TRANSFER_ID,),
        summary="Approve a transfer awaiting approval (another user than its creator)",
    ),
    Operation(
        "transfers.reject", "POST", "/transfers/{id}/reject", Transfer,
        lambda org: org.transfers.reject, path_params=(TRANSFER_ID,),
        summary="Reject a transfer awaiting approval (another user than its creator)",
    ),
    Operation(
        "policy.get", "GET", "/policy", Policy, lambda org: org.policy.get,
        summary="The organization's policy: approval threshold, daily limit, destinations",
    ),
    Operation(
        "policy.put", "PUT", "/policy", Policy, lambda org: org.policy.put, body=SetPolicy,
        summary="Replace the organization's policy",
    ),
    Operation(
        "virtual_account.get", "GET", "/virtual-account", VirtualAccount,
        lambda org: org.virtual_account.get,
        summary="The organization's virtual account (provisioned on first call)",
    ),
    Operation(
        "virtual_wallet.get", "GET", "/virtual-wallet", VirtualWallet,
        lambda org: org.virtual_wallet.get,
        summary="The organization's virtual wallet (provisioned on first call)",
    ),
    Operation(
        "wallets.create", "POST", "/wallets", Wallet, lambda org: org.wallets.create,
        status=201, body=CreateWallet, idempotency="required",
        summary="Create a custody-managed wallet",
    ),
    Operation(
        "wallets.list", "GET", "/wallets", ListOf[Wallet], lambda org: org.wallets.list,
        query=ListQuery, chunks=lambda org: org.wallets.chunks,
        summary="List the organization's wallets",
    ),
    Operation(
        "wallets.track", "POST", "/wallets/track", TrackedWalletResponse,
        lambda org: org.wallets.track, status=201, body=TrackWallet, idempotency="optional",
        summary="Track a watch-only wallet",
    ),
    Operation(
        "wallets.get", "GET", "/wallets/{address}", Wallet, lambda org: org.wallets.get,
        path_params=(ADDRESS,), summary="One wallet by its address",
    ),
    Operation(
        "wallets.update", "PATCH", "/wallets/{address}", Wallet, lambda org: org.wallets.update,
        body=UpdateWallet, path_params=(ADDRESS,), summary="Rename a wallet",
    ),
    Operation(
        "wallets.delete", "DELETE", "/wallets/{address}", Deleted,
        lambda org: org.wallets.delete, path_params=(ADDRESS,),
        summary="Remove a wallet from the organization",
    ),
    Operation(
        "recipients.create", "POST", "/recipients", Recipient,
        lambda org: org.recipients.create, status=201, body=CreateRecipient,
        idempotency="required", summary="Save a recipient address",
    ),
    Operation(
        "recipients.list", "GET", "/recipients", ListOf[Recipient],
        lambda org: org.recipients.list, query=ListQuery,
        chunks=lambda org: org.recipients.chunks, summary="List saved recipients",
    ),
    Operation(
        "recipients.update", "PATCH", "/recipients/{id}", Recipient,
        lambda org: org.recipients.update, body=UpdateRecipient, path_params=(ROW_ID,),
        summary="Change a recipient's address or label",
    ),
    Operation(
        "recipients.delete", "DELETE", "/recipients/{id}", Deleted,
        lambda org: org.recipients.delete, path_params=(ROW_ID,),
        summary="Remove a recipient",
    ),
    Operation(
        "bank_accounts.create", "POST", "/bank-accounts", BankAccount,
        lambda org: org.bank_accounts.create, status=201, body=CreateBankAccount,
        idempotency="optional", sealed=_always,
        summary="Register a bank account with the fiat provider",
    ),
    Operation(
        "bank_accounts.list", "GET", "/bank-accounts", ListOf[BankAccountRow],
        lambda org: org.bank_accounts.list, summary="List bank accounts",
    ),
    Operation(
        "bank_accounts.update", "PUT", "/bank-accounts/{id}", BankAccount,
        lambda org: org.bank_accounts.update, body=UpdateBankAccount,
        path_params=(PathParam("id", BankAccountRef),), idempotency="optional", sealed=_always,
        summary="Replace a bank account's details (a new account at the provider, the old"
        " one deactivated there)",
    ),
    Operation(
        "webhooks.create", "POST", "/webhooks", CreatedWebhook, lambda org: org.webhooks.create,
        status=201, body=CreateWebhook, idempotency="optional", sealed=_always,
        summary="Register a webhook (its secret is shown once)",
    ),
    Operation(
        "webhooks.list", "GET", "/webhooks", ListOf[Webhook], lambda org: org.webhooks.list,
        summary="List webhooks",
    ),
    Operation(
        "webhooks.deliveries", "GET", "/webhooks/{id}/deliveries", Page[Delivery],
        lambda org: org.webhooks.deliveries, query=PageQuery, path_params=(ROW_ID,),
        summary="A webhook's deliveries, newest first",
    ),
    Operation(
        "webhooks.retry_delivery", "POST", "/webhooks/{id}/deliveries/{deliveryId}/retry",
        Delivery, lambda org: org.webhooks.retry_delivery,
        path_params=(ROW_ID, PathParam("deliveryId", DeliveryId)),
        summary="Send one delivery again now",
    ),
    Operation(
        "webhooks.delete", "DELETE", "/webhooks/{id}", Deleted, lambda org: org.webhooks.delete,
        path_params=(ROW_ID,), summary="Delete a webhook",
    ),
    Operation(
        "yield_artifacts.list", "GET", "/yield/artifacts", ListOf[YieldArtifact],
        runs_public=lambda t: t.yield_artifacts.list, query=ArtifactsQuery,
        summary="Published yield periods, newest first; with periodId, one period whole (public)",
    ),
    Operation(
        "yield_artifacts.get", "GET", "/yield/artifacts", YieldPeriod,
        runs_public=lambda t: t.yield_artifacts.get, query=ArtifactQuery,
        cache="forever", selected_by="periodId",
        summary="One published yield period whole (public, immutable)",
    ),
    Operation(
        "yields.claims", "GET", "/yield/{address}", ListOf[YieldClaim],
        lambda org: org.yields.claims, query=ClaimsQuery, path_params=(ADDRESS,),
        summary="An address's yield claims and their status",
    ),
    Operation(
        "swaps.prepare_deposit", "POST", "/{chainId}/deposit/prepare", Prepared,
        lambda org: org.swaps.prepare_deposit, body=PrepareSwap, path_params=(CHAIN,),
        summary="Steps to deposit a stablecoin into c0",
    ),
    Operation(
        "swaps.prepare_withdraw", "POST", "/{chainId}/withdraw/prepare", Prepared,
        lambda org: org.swaps.prepare_withdraw, body=PrepareSwap, path_params=(CHAIN,),
        summary="Steps to withdraw c0 to a stablecoin",
    ),
    Operation(
        "transactions.record", "POST", "/{chainId}/transactions", Recorded,
        lambda org: org.transactions.record, status=201, body=RecordTransaction,
        path_params=(CHAIN,), idempotency="optional",
        summary="Record a transaction for indexing",
    ),
    Operation(
        "transactions.list", "GET", "/{chainId}/transactions", Page[Transaction],
        lambda org: org.transactions.list, query=TransactionsQuery, path_params=(CHAIN,),
        summary="The organization's tracked transactions on a chain, newest first",
    ),
    Operation(
        "transactions.get", "GET", "/{chainId}/transactions/{hash}", Transaction,
        lambda org: org.transactions.get, path_params=(CHAIN, PathParam("hash", TxHash)),
        summary="A tracked transaction and its receipt",
    ),
    Operation(
        "balances.get", "GET", "/{chainId}/balances/{address}", ListOf[TokenBalance],
        lambda org: org.balances.get, path_params=(CHAIN, ADDRESS),
        summary="Token balances of an address",
    ),
    Operation(
        "yields.estimate", "GET", "/{chainId}/yield/estimate", YieldEstimate,
        lambda org: org.yields.estimate, query=YieldQuery, path_params=(CHAIN,),
        summary="Yield projection of a c0 balance",
    ),
    Operation(
        "yields.get", "GET", "/{chainId}/yield", YieldEstimate, lambda org: org.yields.estimate,
        query=YieldQuery, path_params=(CHAIN,),
        summary="Yield projection of a c0 balance (same as /yield/estimate)",
    ),
    Operation(
        "audit_events.list", "GET", "/audit-events", Page[AuditEvent],
        lambda org: org.audit_events.list, query=PageQuery,
        summary="The organization's audit log, newest first",
    ),
    Operation(
        "ledger.balances", "GET", "/wallets/{address}/ledger-balances", LedgerBalances,
        lambda org: org.ledger.balances, query=LedgerQuery, path_params=(ADDRESS,),
        summary="A wallet's balances from the journal at a time: posted, pending, available",
    ),
    Operation(
        "statements.get", "GET", "/statements", Statement, lambda org: org.statements.get,
        query=StatementQuery,
        summary="A wallet's entries in one token between two times, with opening and closing",
    ),
    Operation(
        "statements.csv", "GET", "/statements", ListOf[StatementLine],
        lambda org: org.statements.csv, query=StatementQuery,
        chunks=lambda org: org.statements.csv_chunks, csv=STATEMENT_CSV, accept="text/csv",
        summary="The statement as CSV (Accept: text/csv): opening, entries, closing",
    ),
    Operation(
        "reconciliation.run", "POST", "/reconciliation/runs", ReconciliationRun,
        lambda org: org.reconciliation.run, status=201, body=RunReconciliation,
        summary="Reconcile the books with the chain now, at one height",
    ),
    Operation(
        "reconciliation.get", "GET", "/reconciliation", Reconciliation,
        lambda org: org.reconciliation.get, summary="The last reconciliation run and the open breaks",
    ),
    Operation(
        "reconciliation.breaks", "GET", "/reconciliation/breaks", Page[Break],
        lambda org: org.reconciliation.breaks, query=BreaksQuery,
        summary="Reconciliation breaks, newest first",
    ),
    Operation(
        "reconciliation.resolve", "POST", "/reconciliation/breaks/{id}/resolve", Break,
        lambda org: org.reconciliation.resolve, body=ResolveBreak, path_params=(ROW_ID,),
        summary="Accept a break's difference: a correction booked to external, who and why kept",
    ),
    Operation(
        "test_helpers.faucet", "POST", "/test-helpers/{chainId}/faucet", Funded,
        lambda org: org.test_helpers.faucet, body=Faucet, path_params=(CHAIN,),
        summary="Fund an address (only on a chain that can mint)",
    ),
)  # fmt: skip
