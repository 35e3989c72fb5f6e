"""The typed client's groups and methods, one per operation of the table.

Generated from `treasury.operations.OPERATIONS` by ``scripts/generate_client.py``
(``nox -s client``); do not edit: tests/test_client_typed.py keeps it in step with the
table. Each method is declared with its parameters and returns the core's own model.
A method with a body or a query takes it as a model or a mapping, or its fields by name
(or by position where the model's required fields come first); path parameters come
first, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, overload
from uuid import UUID

from .._infra.models import Deleted, ListOf, ListQuery, Page, PageQuery
from .._records.transactions import RecordTransaction, TransactionType
from ..audit.models import AuditEvent
from ..balances.models import TokenBalance
from ..bank_accounts.models import (
    AccountDetails,
    BankAccount,
    BankAccountRow,
    CreateBankAccount,
    PostalAddress,
    UpdateBankAccount,
)
from ..books.models import (
    Break,
    BreaksQuery,
    LedgerBalances,
    LedgerQuery,
    Reconciliation,
    ReconciliationRun,
    ResolveBreak,
    RunReconciliation,
    Statement,
    StatementQuery,
    Token,
)
from ..policy.models import Policy, SetPolicy
from ..recipients.models import CreateRecipient, Recipient, UpdateRecipient
from ..swaps.models import Prepared, PrepareSwap
from ..test_helpers.models import Faucet, Funded
from ..transactions.models import Recorded, Transaction, TransactionsQuery
from ..transfers.models import (
    CreateTransfer,
    CreateTransferBatch,
    Destination,
    ExportQuery,
    Source,
    Transfer,
    TransferBatch,
)
from ..virtual.models import VirtualAccount, VirtualWallet
from ..wallets.models import CreateWallet, TrackedWalletResponse, TrackWallet, UpdateWallet, Wallet
from ..webhooks.models import CreatedWebhook, CreateWebhook, Delivery, EventName, Webhook
from ..yields.models import (
    ArtifactQuery,
    ArtifactsQuery,
    ClaimsQuery,
    YieldArtifact,
    YieldClaim,
    YieldEstimate,
    YieldPeriod,
    YieldQuery,
)
from ._spec import Call, Group, Spec

__all__ = ["IDEMPOTENCY_HEADER", "PREFIX", "Groups"]

PREFIX = "/v1"  # where the API is served by default
IDEMPOTENCY_HEADER = "Idempotency-Key"

_TRANSFERS_CREATE = Spec(
    "transfers.create",
    "POST",
    "/transfers",
    Transfer,
    params=(),
    status=201,
    body=CreateTransfer,
    idempotency="required",
)
_TRANSFERS_CREATE_BATCH = Spec(
    "transfers.create_batch",
    "POST",
    "/transfers/batch",
    TransferBatch,
    params=(),
    status=200,
    body=CreateTransferBatch,
    idempotency="required",
)
_TRANSFERS_LIST = Spec(
    "transfers.list", "GET", "/transfers", Page[Transfer], params=(), status=200, query=PageQuery
)
_TRANSFERS_EXPORT = Spec(
    "transfers.export",
    "GET",
    "/transfers/export",
    str,
    params=(),
    status=200,
    query=ExportQuery,
    csv=True,
)
_TRANSFERS_GET = Spec(
    "transfers.get", "GET", "/transfers/{id}", Transfer, params=("id",), status=200
)
_TRANSFERS_APPROVE = Spec(
    "transfers.approve", "POST", "/transfers/{id}/approve", Transfer, params=("id",), status=200
)
_TRANSFERS_REJECT = Spec(
    "transfers.reject", "POST", "/transfers/{id}/reject", Transfer, params=("id",), status=200
)
_POLICY_GET = Spec("policy.get", "GET", "/policy", Policy, params=(), status=200)
_POLICY_PUT = Spec("policy.put", "PUT", "/policy", Policy, params=(), status=200, body=SetPolicy)
_VIRTUAL_ACCOUNT_GET = Spec(
    "virtual_account.get", "GET", "/virtual-account", VirtualAccount, params=(), status=200
)
_VIRTUAL_WALLET_GET = Spec(
    "virtual_wallet.get", "GET", "/virtual-wallet", VirtualWallet, params=(), status=200
)
_WALLETS_CREATE = Spec(
    "wallets.create",
    "POST",
    "/wallets",
    Wallet,
    params=(),
    status=201,
    body=CreateWallet,
    idempotency="required",
)
_WALLETS_LIST = Spec(
    "wallets.list", "GET", "/wallets", ListOf[Wallet], params=(), status=200, query=ListQuery
)
_WALLETS_TRACK = Spec(
    "wallets.track",
    "POST",
    "/wallets/track",
    TrackedWalletResponse,
    params=(),
    status=201,
    body=TrackWallet,
    idempotency="optional",
)
_WALLETS_GET = Spec(
    "wallets.get", "GET", "/wallets/{address}", Wallet, params=("address",), status=200
)
_WALLETS_UPDATE = Spec(
    "wallets.update",
    "PATCH",
    "/wallets/{address}",
    Wallet,
    params=("address",),
    status=200,
    body=UpdateWallet,
)
_WALLETS_DELETE = Spec(
    "wallets.delete", "DELETE", "/wallets/{address}", Deleted, params=("address",), status=200
)
_RECIPIENTS_CREATE = Spec(
    "recipients.create",
    "POST",
    "/recipients",
    Recipient,
    params=(),
    status=201,
    body=CreateRecipient,
    idempotency="required",
)
_RECIPIENTS_LIST = Spec(
    "recipients.list",
    "GET",
    "/recipients",
    ListOf[Recipient],
    params=(),
    status=200,
    query=ListQuery,
)
_RECIPIENTS_UPDATE = Spec(
    "recipients.update",
    "PATCH",
    "/recipients/{id}",
    Recipient,
    params=("id",),
    status=200,
    body=UpdateRecipient,
)
_RECIPIENTS_DELETE = Spec(
    "recipients.delete", "DELETE", "/recipients/{id}", Deleted, params=("id",), status=200
)
_BANK_ACCOUNTS_CREATE = Spec(
    "bank_accounts.create",
    "POST",
    "/bank-accounts",
    BankAccount,
    params=(),
    status=201,
    body=CreateBankAccount,
    idempotency="optional",
)
_BANK_ACCOUNTS_LIST = Spec(
    "bank_accounts.list", "GET", "/bank-accounts", ListOf[BankAccountRow], params=(), status=200
)
_BANK_ACCOUNTS_UPDATE = Spec(
    "bank_accounts.update",
    "PUT",
    "/bank-accounts/{id}",
    BankAccount,
    params=("id",),
    status=200,
    body=UpdateBankAccount,
    idempotency="optional",
)
_WEBHOOKS_CREATE = Spec(
    "webhooks.create",
    "POST",
    "/webhooks",
    CreatedWebhook,
    params=(),
    status=201,
    body=CreateWebhook,
    idempotency="optional",
)
_WEBHOOKS_LIST = Spec("webhooks.list", "GET", "/webhooks", ListOf[Webhook], params=(), status=200)
_WEBHOOKS_DELIVERIES = Spec(
    "webhooks.deliveries",
    "GET",
    "/webhooks/{id}/deliveries",
    Page[Delivery],
    params=("id",),
    status=200,
    query=PageQuery,
)
_WEBHOOKS_RETRY_DELIVERY = Spec(
    "webhooks.retry_delivery",
    "POST",
    "/webhooks/{id}/deliveries/{deliveryId}/retry",
    Delivery,
    params=("id", "deliveryId"),
    status=200,
)
_WEBHOOKS_DELETE = Spec(
    "webhooks.delete", "DELETE", "/webhooks/{id}", Deleted, params=("id",), status=200
)
_YIELD_ARTIFACTS_LIST = Spec(
    "yield_artifacts.list",
    "GET",
    "/yield/artifacts",
    ListOf[YieldArtifact],
    params=(),
    status=200,
    query=ArtifactsQuery,
)
_YIELD_ARTIFACTS_GET = Spec(
    "yield_artifacts.get",
    "GET",
    "/yield/artifacts",
    YieldPeriod,
    params=(),
    status=200,
    query=ArtifactQuery,
    selected_by="periodId",
)
_YIELDS_CLAIMS = Spec(
    "yields.claims",
    "GET",
    "/yield/{address}",
    ListOf[YieldClaim],
    params=("address",),
    status=200,
    query=ClaimsQuery,
)
_SWAPS_PREPARE_DEPOSIT = Spec(
    "swaps.prepare_deposit",
    "POST",
    "/{chainId}/deposit/prepare",
    Prepared,
    params=("chainId",),
    status=200,
    body=PrepareSwap,
)
_SWAPS_PREPARE_WITHDRAW = Spec(
    "swaps.prepare_withdraw",
    "POST",
    "/{chainId}/withdraw/prepare",
    Prepared,
    params=("chainId",),
    status=200,
    body=PrepareSwap,
)
_TRANSACTIONS_RECORD = Spec(
    "transactions.record",
    "POST",
    "/{chainId}/transactions",
    Recorded,
    params=("chainId",),
    status=201,
    body=RecordTransaction,
    idempotency="optional",
)
_TRANSACTIONS_LIST = Spec(
    "transactions.list",
    "GET",
    "/{chainId}/transactions",
    Page[Transaction],
    params=("chainId",),
    status=200,
    query=TransactionsQuery,
)
_TRANSACTIONS_GET = Spec(
    "transactions.get",
    "GET",
    "/{chainId}/transactions/{hash}",
    Transaction,
    params=("chainId", "hash"),
    status=200,
)
_BALANCES_GET = Spec(
    "balances.get",
    "GET",
    "/{chainId}/balances/{address}",
    ListOf[TokenBalance],
    params=("chainId", "address"),
    status=200,
)
_YIELDS_ESTIMATE = Spec(
    "yields.estimate",
    "GET",
    "/{chainId}/yield/estimate",
    YieldEstimate,
    params=("chainId",),
    status=200,
    query=YieldQuery,
)
_YIELDS_GET = Spec(
    "yields.get",
    "GET",
    "/{chainId}/yield",
    YieldEstimate,
    params=("chainId",),
    status=200,
    query=YieldQuery,
)
_AUDIT_EVENTS_LIST = Spec(
    "audit_events.list",
    "GET",
    "/audit-events",
    Page[AuditEvent],
    params=(),
    status=200,
    query=PageQuery,
)
_LEDGER_BALANCES = Spec(
    "ledger.balances",
    "GET",
    "/wallets/{address}/ledger-balances",
    LedgerBalances,
    params=("address",),
    status=200,
    query=LedgerQuery,
)
_STATEMENTS_GET = Spec(
    "statements.get", "GET", "/statements", Statement, params=(), status=200, query=StatementQuery
)
_STATEMENTS_CSV = Spec(
    "statements.csv",
    "GET",
    "/statements",
    str,
    params=(),
    status=200,
    query=StatementQuery,
    csv=True,
    accept="text/csv",
)
_RECONCILIATION_RUN = Spec(
    "reconciliation.run",
    "POST",
    "/reconciliation/runs",
    ReconciliationRun,
    params=(),
    status=201,
    body=RunReconciliation,
)
_RECONCILIATION_GET = Spec(
    "reconciliation.get", "GET", "/reconciliation", Reconciliation, params=(), status=200
)
_RECONCILIATION_BREAKS = Spec(
    "reconciliation.breaks",
    "GET",
    "/reconciliation/breaks",
    Page[Break],
    params=(),
    status=200,
    query=BreaksQuery,
)
_RECONCILIATION_RESOLVE = Spec(
    "reconciliation.resolve",
    "POST",
    "/reconciliation/breaks/{id}/resolve",
    Break,
    params=("id",),
    status=200,
    body=ResolveBreak,
)
_TEST_HELPERS_FAUCET = Spec(
    "test_helpers.faucet",
    "POST",
    "/test-helpers/{chainId}/faucet",
    Funded,
    params=("chainId",),
    status=200,
    body=Faucet,
)


class TransfersGroup(Group):
    """``c.transfers``: its operations."""

    @overload
    def create(
        self, body: CreateTransfer | Mapping[str, Any], /, *, idempotency_key: str | None = None
    ) -> Transfer: ...
    @overload
    def create(
        self,
        /,
        *,
        amount: str | int | Decimal,
        client_reference_id: str | None = None,
        developer_fee: str | int | Decimal | None = None,
        source: Source | Mapping[str, Any],
        destination: Destination | Mapping[str, Any],
        idempotency_key: str | None = None,
    ) -> Transfer: ...
    def create(self, *args: Any, idempotency_key: str | None = None, **fields: Any) -> Transfer:
        """Move value between a bank, wallets and c0: ``POST /v1/transfers``."""
        return self._call(_TRANSFERS_CREATE, (), args, fields, idempotency_key)

    @overload
    def create_batch(
        self,
        body: CreateTransferBatch | Mapping[str, Any],
        /,
        *,
        idempotency_key: str | None = None,
    ) -> TransferBatch: ...
    @overload
    def create_batch(
        self, /, items: list[Any], atomic: bool | None = None, *, idempotency_key: str | None = None
    ) -> TransferBatch: ...
    def create_batch(
        self, *args: Any, idempotency_key: str | None = None, **fields: Any
    ) -> TransferBatch:
        """A payout run: up to 1,000 transfers, each judged as POST /transfers (200, per item): ``POST /v1/transfers/batch``."""
        return self._call(_TRANSFERS_CREATE_BATCH, (), args, fields, idempotency_key)

    @overload
    def list(self, query: PageQuery | Mapping[str, Any], /) -> Page[Transfer]: ...
    @overload
    def list(self, /, limit: int | None = None, cursor: str | None = None) -> Page[Transfer]: ...
    def list(self, *args: Any, **fields: Any) -> Page[Transfer]:
        """The transfers feed, newest first: ``GET /v1/transfers``."""
        return self._call(_TRANSFERS_LIST, (), args, fields, None)

    @overload
    def export(self, query: ExportQuery | Mapping[str, Any], /) -> str: ...
    @overload
    def export(self, /, from_: datetime | str, to: datetime | str) -> str: ...
    def export(self, *args: Any, **fields: Any) -> str:
        """The feed between two times as CSV, oldest first: ``GET /v1/transfers/export``."""
        return self._call(_TRANSFERS_EXPORT, (), args, fields, None)

    def get(self, id_: UUID | str, /) -> Transfer:
        """One transfer: ``GET /v1/transfers/{id}``."""
        return self._call(_TRANSFERS_GET, (id_,), (), {}, None)

    def approve(self, id_: UUID | str, /) -> Transfer:
        """Approve a transfer awaiting approval (another user than its creator): ``POST /v1/transfers/{id}/approve``."""
        return self._call(_TRANSFERS_APPROVE, (id_,), (), {}, None)

    def reject(self, id_: UUID | str, /) -> Transfer:
        """Reject a transfer awaiting approval (another user than its creator): ``POST /v1/transfers/{id}/reject``."""
        return self._call(_TRANSFERS_REJECT, (id_,), (), {}, None)


class PolicyGroup(Group):
    """``c.policy``: its operations."""

    def get(self) -> Policy:
        """The organization's policy: approval threshold, daily limit, destinations: ``GET /v1/policy``."""
        return self._call(_POLICY_GET, (), (), {}, None)

    @overload
    def put(self, body: SetPolicy | Mapping[str, Any], /) -> Policy: ...
    @overload
    def put(
        self,
        /,
        approval_threshold: str | int | Decimal,
        daily_limit: str | int | Decimal,
        destinations: Literal["any", "known"],
        destination_cooldown_hours: int,
        gas_station: int | None,
    ) -> Policy: ...
    def put(self, *args: Any, **fields: Any) -> Policy:
        """Replace the organization's policy: ``PUT /v1/policy``."""
        return self._call(_POLICY_PUT, (), args, fields, None)


class VirtualAccountGroup(Group):
    """``c.virtual_account``: its operations."""

    def get(self) -> VirtualAccount:
        """The organization's virtual account (provisioned on first call): ``GET /v1/virtual-account``."""
        return self._call(_VIRTUAL_ACCOUNT_GET, (), (), {}, None)


class VirtualWalletGroup(Group):
    """``c.virtual_wallet``: its operations."""

    def get(self) -> VirtualWallet:
        """The organization's virtual wallet (provisioned on first call): ``GET /v1/virtual-wallet``."""
        return self._call(_VIRTUAL_WALLET_GET, (), (), {}, None)


class WalletsGroup(Group):
    """``c.wallets``: its operations."""

    @overload
    def create(
        self, body: CreateWallet | Mapping[str, Any], /, *, idempotency_key: str | None = None
    ) -> Wallet: ...
    @overload
    def create(
        self, /, label: str | None = None, *, idempotency_key: str | None = None
    ) -> Wallet: ...
    def create(self, *args: Any, idempotency_key: str | None = None, **fields: Any) -> Wallet:
        """Create a custody-managed wallet: ``POST /v1/wallets``."""
        return self._call(_WALLETS_CREATE, (), args, fields, idempotency_key)

    @overload
    def list(self, query: ListQuery | Mapping[str, Any], /) -> ListOf[Wallet]: ...
    @overload
    def list(
        self,
        /,
        sort: Literal["created_at", "label"] | None = None,
        order: Literal["asc", "desc"] | None = None,
    ) -> ListOf[Wallet]: ...
    def list(self, *args: Any, **fields: Any) -> ListOf[Wallet]:
        """List the organization's wallets: ``GET /v1/wallets``."""
        return self._call(_WALLETS_LIST, (), args, fields, None)

    @overload
    def track(
        self, body: TrackWallet | Mapping[str, Any], /, *, idempotency_key: str | None = None
    ) -> TrackedWalletResponse: ...
    @overload
    def track(
        self, /, address: str, label: str, *, idempotency_key: str | None = None
    ) -> TrackedWalletResponse: ...
    def track(
        self, *args: Any, idempotency_key: str | None = None, **fields: Any
    ) -> TrackedWalletResponse:
        """Track a watch-only wallet: ``POST /v1/wallets/track``."""
        return self._call(_WALLETS_TRACK, (), args, fields, idempotency_key)

    def get(self, address: str, /) -> Wallet:
        """One wallet by its address: ``GET /v1/wallets/{address}``."""
        return self._call(_WALLETS_GET, (address,), (), {}, None)

    @overload
    def update(self, address: str, body: UpdateWallet | Mapping[str, Any], /) -> Wallet: ...
    @overload
    def update(self, address: str, /, label: str) -> Wallet: ...
    def update(self, address: str, *args: Any, **fields: Any) -> Wallet:
        """Rename a wallet: ``PATCH /v1/wallets/{address}``."""
        return self._call(_WALLETS_UPDATE, (address,), args, fields, None)

    def delete(self, address: str, /) -> Deleted:
        """Remove a wallet from the organization: ``DELETE /v1/wallets/{address}``."""
        return self._call(_WALLETS_DELETE, (address,), (), {}, None)


class RecipientsGroup(Group):
    """``c.recipients``: its operations."""

    @overload
    def create(
        self, body: CreateRecipient | Mapping[str, Any], /, *, idempotency_key: str | None = None
    ) -> Recipient: ...
    @overload
    def create(
        self, /, address: str, label: str, *, idempotency_key: str | None = None
    ) -> Recipient: ...
    def create(self, *args: Any, idempotency_key: str | None = None, **fields: Any) -> Recipient:
        """Save a recipient address: ``POST /v1/recipients``."""
        return self._call(_RECIPIENTS_CREATE, (), args, fields, idempotency_key)

    @overload
    def list(self, query: ListQuery | Mapping[str, Any], /) -> ListOf[Recipient]: ...
    @overload
    def list(
        self,
        /,
        sort: Literal["created_at", "label"] | None = None,
        order: Literal["asc", "desc"] | None = None,
    ) -> ListOf[Recipient]: ...
    def list(self, *args: Any, **fields: Any) -> ListOf[Recipient]:
        """List saved recipients: ``GET /v1/recipients``."""
        return self._call(_RECIPIENTS_LIST, (), args, fields, None)

    @overload
    def update(self, id_: int, body: UpdateRecipient | Mapping[str, Any], /) -> Recipient: ...
    @overload
    def update(
        self, id_: int, /, address: str | None = None, label: str | None = None
    ) -> Recipient: ...
    def update(self, id_: int, *args: Any, **fields: Any) -> Recipient:
        """Change a recipient's address or label: ``PATCH /v1/recipients/{id}``."""
        return self._call(_RECIPIENTS_UPDATE, (id_,), args, fields, None)

    def delete(self, id_: int, /) -> Deleted:
        """Remove a recipient: ``DELETE /v1/recipients/{id}``."""
        return self._call(_RECIPIENTS_DELETE, (id_,), (), {}, None)


class BankAccountsGroup(Group):
    """``c.bank_accounts``: its operations."""

    @overload
    def create(
        self, body: CreateBankAccount | Mapping[str, Any], /, *, idempotency_key: str | None = None
    ) -> BankAccount: ...
    @overload
    def create(
        self,
        /,
        *,
        account_type: Literal["us"],
        currency: Literal["usd"],
        bank_name: str,
        business_name: str,
        account_owner_name: str,
        account_owner_type: Literal["business"],
        checking_or_savings: Literal["checking", "savings"] | None = None,
        account: AccountDetails | Mapping[str, Any],
        address: PostalAddress | Mapping[str, Any],
        idempotency_key: str | None = None,
    ) -> BankAccount: ...
    def create(self, *args: Any, idempotency_key: str | None = None, **fields: Any) -> BankAccount:
        """Register a bank account with the fiat provider: ``POST /v1/bank-accounts``."""
        return self._call(_BANK_ACCOUNTS_CREATE, (), args, fields, idempotency_key)

    def list(self) -> ListOf[BankAccountRow]:
        """List bank accounts: ``GET /v1/bank-accounts``."""
        return self._call(_BANK_ACCOUNTS_LIST, (), (), {}, None)

    @overload
    def update(
        self,
        id_: int | str,
        body: UpdateBankAccount | Mapping[str, Any],
        /,
        *,
        idempotency_key: str | None = None,
    ) -> BankAccount: ...
    @overload
    def update(
        self,
        id_: int | str,
        /,
        account: AccountDetails | Mapping[str, Any],
        address: PostalAddress | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> BankAccount: ...
    def update(
        self, id_: int | str, *args: Any, idempotency_key: str | None = None, **fields: Any
    ) -> BankAccount:
        """Replace a bank account's details (a new account at the provider, the old one deactivated there): ``PUT /v1/bank-accounts/{id}``."""
        return self._call(_BANK_ACCOUNTS_UPDATE, (id_,), args, fields, idempotency_key)


class WebhooksGroup(Group):
    """``c.webhooks``: its operations."""

    @overload
    def create(
        self, body: CreateWebhook | Mapping[str, Any], /, *, idempotency_key: str | None = None
    ) -> CreatedWebhook: ...
    @overload
    def create(
        self,
        /,
        url: str,
        events: list[EventName],
        wallets: list[str] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> CreatedWebhook: ...
    def create(
        self, *args: Any, idempotency_key: str | None = None, **fields: Any
    ) -> CreatedWebhook:
        """Register a webhook (its secret is shown once): ``POST /v1/webhooks``."""
        return self._call(_WEBHOOKS_CREATE, (), args, fields, idempotency_key)

    def list(self) -> ListOf[Webhook]:
        """List webhooks: ``GET /v1/webhooks``."""
        return self._call(_WEBHOOKS_LIST, (), (), {}, None)

    @overload
    def deliveries(self, id_: int, query: PageQuery | Mapping[str, Any], /) -> Page[Delivery]: ...
    @overload
    def deliveries(
        self, id_: int, /, limit: int | None = None, cursor: str | None = None
    ) -> Page[Delivery]: ...
    def deliveries(self, id_: int, *args: Any, **fields: Any) -> Page[Delivery]:
        """A webhook's deliveries, newest first: ``GET /v1/webhooks/{id}/deliveries``."""
        return self._call(_WEBHOOKS_DELIVERIES, (id_,), args, fields, None)

    def retry_delivery(self, id_: int, delivery_id: str, /) -> Delivery:
        """Send one delivery again now: ``POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry``."""
        return self._call(
            _WEBHOOKS_RETRY_DELIVERY,
            (
                id_,
                delivery_id,
            ),
            (),
            {},
            None,
        )

    def delete(self, id_: int, /) -> Deleted:
        """Delete a webhook: ``DELETE /v1/webhooks/{id}``."""
        return self._call(_WEBHOOKS_DELETE, (id_,), (), {}, None)


class YieldArtifactsGroup(Group):
    """``c.yield_artifacts``: its operations."""

    @overload
    def list(self, query: ArtifactsQuery | Mapping[str, Any], /) -> ListOf[YieldArtifact]: ...
    @overload
    def list(self, /, chain_id: int | None = None) -> ListOf[YieldArtifact]: ...
    def list(self, *args: Any, **fields: Any) -> ListOf[YieldArtifact]:
        """Published yield periods, newest first; with periodId, one period whole (public): ``GET /v1/yield/artifacts``."""
        return self._call(_YIELD_ARTIFACTS_LIST, (), args, fields, None)

    @overload
    def get(self, query: ArtifactQuery | Mapping[str, Any], /) -> YieldPeriod: ...
    @overload
    def get(self, /, period_id: str | None = None, chain_id: int | None = None) -> YieldPeriod: ...
    def get(self, *args: Any, **fields: Any) -> YieldPeriod:
        """One published yield period whole (public, immutable): ``GET /v1/yield/artifacts``."""
        return self._call(_YIELD_ARTIFACTS_GET, (), args, fields, None)


class YieldsGroup(Group):
    """``c.yields``: its operations."""

    @overload
    def claims(
        self, address: str, query: ClaimsQuery | Mapping[str, Any], /
    ) -> ListOf[YieldClaim]: ...
    @overload
    def claims(self, address: str, /, chain_id: int | None = None) -> ListOf[YieldClaim]: ...
    def claims(self, address: str, *args: Any, **fields: Any) -> ListOf[YieldClaim]:
        """An address's yield claims and their status: ``GET /v1/yield/{address}``."""
        return self._call(_YIELDS_CLAIMS, (address,), args, fields, None)

    @overload
    def estimate(
        self, chain_id: int, query: YieldQuery | Mapping[str, Any], /
    ) -> YieldEstimate: ...
    @overload
    def estimate(self, chain_id: int, /, address: str) -> YieldEstimate: ...
    def estimate(self, chain_id: int, *args: Any, **fields: Any) -> YieldEstimate:
        """Yield projection of a c0 balance: ``GET /v1/{chainId}/yield/estimate``."""
        return self._call(_YIELDS_ESTIMATE, (chain_id,), args, fields, None)

    @overload
    def get(self, chain_id: int, query: YieldQuery | Mapping[str, Any], /) -> YieldEstimate: ...
    @overload
    def get(self, chain_id: int, /, address: str) -> YieldEstimate: ...
    def get(self, chain_id: int, *args: Any, **fields: Any) -> YieldEstimate:
        """Yield projection of a c0 balance (same as /yield/estimate): ``GET /v1/{chainId}/yield``."""
        return self._call(_YIELDS_GET, (chain_id,), args, fields, None)


class SwapsGroup(Group):
    """``c.swaps``: its operations."""

    @overload
    def prepare_deposit(
        self, chain_id: int, body: PrepareSwap | Mapping[str, Any], /
    ) -> Prepared: ...
    @overload
    def prepare_deposit(
        self,
        chain_id: int,
        /,
        token: Literal["USDC", "USDT"],
        amount: str | int | Decimal,
        from_: str,
        recipient: str | None = None,
    ) -> Prepared: ...
    def prepare_deposit(self, chain_id: int, *args: Any, **fields: Any) -> Prepared:
        """Steps to deposit a stablecoin into c0: ``POST /v1/{chainId}/deposit/prepare``."""
        return self._call(_SWAPS_PREPARE_DEPOSIT, (chain_id,), args, fields, None)

    @overload
    def prepare_withdraw(
        self, chain_id: int, body: PrepareSwap | Mapping[str, Any], /
    ) -> Prepared: ...
    @overload
    def prepare_withdraw(
        self,
        chain_id: int,
        /,
        token: Literal["USDC", "USDT"],
        amount: str | int | Decimal,
        from_: str,
        recipient: str | None = None,
    ) -> Prepared: ...
    def prepare_withdraw(self, chain_id: int, *args: Any, **fields: Any) -> Prepared:
        """Steps to withdraw c0 to a stablecoin: ``POST /v1/{chainId}/withdraw/prepare``."""
        return self._call(_SWAPS_PREPARE_WITHDRAW, (chain_id,), args, fields, None)


class TransactionsGroup(Group):
    """``c.transactions``: its operations."""

    @overload
    def record(
        self,
        chain_id: int,
        body: RecordTransaction | Mapping[str, Any],
        /,
        *,
        idempotency_key: str | None = None,
    ) -> Recorded: ...
    @overload
    def record(
        self,
        chain_id: int,
        /,
        hash: str,
        type: TransactionType,
        from_: str,
        contract: str,
        token: str,
        amount: str,
        wallet_id: int,
        *,
        idempotency_key: str | None = None,
    ) -> Recorded: ...
    def record(
        self, chain_id: int, *args: Any, idempotency_key: str | None = None, **fields: Any
    ) -> Recorded:
        """Record a transaction for indexing: ``POST /v1/{chainId}/transactions``."""
        return self._call(_TRANSACTIONS_RECORD, (chain_id,), args, fields, idempotency_key)

    @overload
    def list(
        self, chain_id: int, query: TransactionsQuery | Mapping[str, Any], /
    ) -> Page[Transaction]: ...
    @overload
    def list(
        self,
        chain_id: int,
        /,
        limit: int | None = None,
        cursor: str | None = None,
        wallet: str | None = None,
    ) -> Page[Transaction]: ...
    def list(self, chain_id: int, *args: Any, **fields: Any) -> Page[Transaction]:
        """The organization's tracked transactions on a chain, newest first: ``GET /v1/{chainId}/transactions``."""
        return self._call(_TRANSACTIONS_LIST, (chain_id,), args, fields, None)

    def get(self, chain_id: int, hash_: str, /) -> Transaction:
        """A tracked transaction and its receipt: ``GET /v1/{chainId}/transactions/{hash}``."""
        return self._call(
            _TRANSACTIONS_GET,
            (
                chain_id,
                hash_,
            ),
            (),
            {},
            None,
        )


class BalancesGroup(Group):
    """``c.balances``: its operations."""

    def get(self, chain_id: int, address: str, /) -> ListOf[TokenBalance]:
        """Token balances of an address: ``GET /v1/{chainId}/balances/{address}``."""
        return self._call(
            _BALANCES_GET,
            (
                chain_id,
                address,
            ),
            (),
            {},
            None,
        )


class AuditEventsGroup(Group):
    """``c.audit_events``: its operations."""

    @overload
    def list(self, query: PageQuery | Mapping[str, Any], /) -> Page[AuditEvent]: ...
    @overload
    def list(self, /, limit: int | None = None, cursor: str | None = None) -> Page[AuditEvent]: ...
    def list(self, *args: Any, **fields: Any) -> Page[AuditEvent]:
        """The organization's audit log, newest first: ``GET /v1/audit-events``."""
        return self._call(_AUDIT_EVENTS_LIST, (), args, fields, None)


class LedgerGroup(Group):
    """``c.ledger``: its operations."""

    @overload
    def balances(
        self, address: str, query: LedgerQuery | Mapping[str, Any], /
    ) -> LedgerBalances: ...
    @overload
    def balances(self, address: str, /, at: datetime | str | None = None) -> LedgerBalances: ...
    def balances(self, address: str, *args: Any, **fields: Any) -> LedgerBalances:
        """A wallet's balances from the journal at a time: posted, pending, available: ``GET /v1/wallets/{address}/ledger-balances``."""
        return self._call(_LEDGER_BALANCES, (address,), args, fields, None)


class StatementsGroup(Group):
    """``c.statements``: its operations."""

    @overload
    def get(self, query: StatementQuery | Mapping[str, Any], /) -> Statement: ...
    @overload
    def get(
        self,
        /,
        wallet: str,
        token: Token,
        from_: datetime | str | None = None,
        to: datetime | str | None = None,
        chain_id: int | None = None,
    ) -> Statement: ...
    def get(self, *args: Any, **fields: Any) -> Statement:
        """A wallet's entries in one token between two times, with opening and closing: ``GET /v1/statements``."""
        return self._call(_STATEMENTS_GET, (), args, fields, None)

    @overload
    def csv(self, query: StatementQuery | Mapping[str, Any], /) -> str: ...
    @overload
    def csv(
        self,
        /,
        wallet: str,
        token: Token,
        from_: datetime | str | None = None,
        to: datetime | str | None = None,
        chain_id: int | None = None,
    ) -> str: ...
    def csv(self, *args: Any, **fields: Any) -> str:
        """The statement as CSV (Accept: text/csv): opening, entries, closing: ``GET /v1/statements``."""
        return self._call(_STATEMENTS_CSV, (), args, fields, None)


class ReconciliationGroup(Group):
    """``c.reconciliation``: its operations."""

    @overload
    def run(self, body: RunReconciliation | Mapping[str, Any], /) -> ReconciliationRun: ...
    @overload
    def run(self, /, chain_id: int | None = None) -> ReconciliationRun: ...
    def run(self, *args: Any, **fields: Any) -> ReconciliationRun:
        """Reconcile the books with the chain now, at one height: ``POST /v1/reconciliation/runs``."""
        return self._call(_RECONCILIATION_RUN, (), args, fields, None)

    def get(self) -> Reconciliation:
        """The last reconciliation run and the open breaks: ``GET /v1/reconciliation``."""
        return self._call(_RECONCILIATION_GET, (), (), {}, None)

    @overload
    def breaks(self, query: BreaksQuery | Mapping[str, Any], /) -> Page[Break]: ...
    @overload
    def breaks(
        self,
        /,
        status: Literal["open", "resolved"] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Break]: ...
    def breaks(self, *args: Any, **fields: Any) -> Page[Break]:
        """Reconciliation breaks, newest first: ``GET /v1/reconciliation/breaks``."""
        return self._call(_RECONCILIATION_BREAKS, (), args, fields, None)

    @overload
    def resolve(self, id_: int, body: ResolveBreak | Mapping[str, Any], /) -> Break: ...
    @overload
    def resolve(self, id_: int, /, note: str) -> Break: ...
    def resolve(self, id_: int, *args: Any, **fields: Any) -> Break:
        """Accept a break's difference: a correction booked to external, who and why kept: ``POST /v1/reconciliation/breaks/{id}/resolve``."""
        return self._call(_RECONCILIATION_RESOLVE, (id_,), args, fields, None)


class TestHelpersGroup(Group):
    """``c.test_helpers``: its operations."""

    @overload
    def faucet(self, chain_id: int, body: Faucet | Mapping[str, Any], /) -> Funded: ...
    @overload
    def faucet(
        self, chain_id: int, /, address: str, token: str, amount: str | int | Decimal
    ) -> Funded: ...
    def faucet(self, chain_id: int, *args: Any, **fields: Any) -> Funded:
        """Fund an address (only on a chain that can mint): ``POST /v1/test-helpers/{chainId}/faucet``."""
        return self._call(_TEST_HELPERS_FAUCET, (chain_id,), args, fields, None)


class Groups:
    """The groups of operations, one attribute each."""

    def __init__(self, call: Call) -> None:
        self.transfers = TransfersGroup(call)
        self.policy = PolicyGroup(call)
        self.virtual_account = VirtualAccountGroup(call)
        self.virtual_wallet = VirtualWalletGroup(call)
        self.wallets = WalletsGroup(call)
        self.recipients = RecipientsGroup(call)
        self.bank_accounts = BankAccountsGroup(call)
        self.webhooks = WebhooksGroup(call)
        self.yield_artifacts = YieldArtifactsGroup(call)
        self.yields = YieldsGroup(call)
        self.swaps = SwapsGroup(call)
        self.transactions = TransactionsGroup(call)
        self.balances = BalancesGroup(call)
        self.audit_events = AuditEventsGroup(call)
        self.ledger = LedgerGroup(call)
        self.statements = StatementsGroup(call)
        self.reconciliation = ReconciliationGroup(call)
        self.test_helpers = TestHelpersGroup(call)
