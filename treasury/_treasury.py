"""`Treasury`: the framework-agnostic core every front end (HTTP, CLI, notebooks) uses;
`OrganizationHandle`: one organization's operations; `JOBS`: the background work.

The handle is the one place a call is authorised and audited: each method of the table
of operations, reached through it, first needs its operation's scope (`Forbidden`
otherwise), and a call of an operation that changes state runs as an audited call
(`treasury._infra.audit.run`): one event, in the transaction of its change."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, cast

from ._infra import audit, plugins
from ._infra.chains import ChainRegistry, ChainSpec
from ._infra.clock import Clock, system_clock
from ._infra.crypto import CUSTODY_KEYS, SecretBox, resolve_master_key
from ._infra.group import Group
from ._infra.idempotency import purge_expired_keys
from ._infra.jobs import BackgroundWorker, Job, RunSummary, run_pass
from ._infra.ratelimit import Quota, RateLimiter
from ._infra.runtime import Runtime, Scope
from ._infra.schema import migrate
from ._records import journal_history
from .admin import Admin
from .admin.scopes import DEFAULT, grants
from .audit import AuditEvents, BrokenLink, checkpoints, verify_chains
from .backends.custody.base import Custody, CustodyContext
from .backends.fiat.base import FiatContext, FiatProvider
from .backends.storage.base import Storage
from .balances import Balances
from .bank_accounts import BankAccounts
from .bank_accounts.operations import finish_registrations
from .books import Ledger, ReconciliationGroup, Statements, reconcile_books
from .config import Settings
from .deposits import detect_deposits
from .errors import AuthenticationError, Forbidden, RateLimited
from .evm.signing import Signer
from .policy import Policies
from .recipients import Recipients
from .reorgs import check_blocks
from .swaps import Swaps
from .test_helpers import TestHelpers
from .transactions import Transactions
from .transactions.indexer import index_transactions
from .transfers import Transfers
from .transfers.approvals import expire_approvals, start_approved_transfers
from .transfers.jobs import advance_transfers, finish_transfers, heal_nonce_holes
from .transfers.runs import start_queued_transfers
from .transfers.sweep import sweep_virtual_wallets
from .virtual import VirtualAccountGroup, VirtualWalletGroup
from .wallets import Wallets
from .webhooks import Webhooks
from .webhooks.dispatcher import deliver_webhooks
from .yields import Yields, trial
from .yields.artifacts import YieldArtifacts
from .yields.models import YieldPeriod
from .yields.publication import publish_yield_periods
from .yields.snapshots import snapshot_yields

if TYPE_CHECKING:
    from .operations import Operation

#: The background jobs, in the order a pass runs them. Adding a job is adding an entry.
JOBS: tuple[Job, ...] = (
    Job("seal_audit_events", audit.seal_audit_events),
    Job("finish_bank_account_registrations", finish_registrations),
    Job("finish_transfers", finish_transfers),
    Job("expire_transfer_approvals", expire_approvals),
    Job("start_approved_transfers", start_approved_transfers),
    Job("start_queued_transfers", start_queued_transfers),
    Job("index_transactions", index_transactions),
    Job("check_blocks", check_blocks),
    Job("advance_transfers", advance_transfers),
    Job("heal_nonce_holes", heal_nonce_holes),
    Job("detect_deposits", detect_deposits),
    Job("reconcile", reconcile_books),
    Job("sweep_virtual_wallets", sweep_virtual_wallets),
    Job("snapshot_yields", snapshot_yields),
    Job("publish_yield_periods", publish_yield_periods),
    Job("deliver_webhooks", deliver_webhooks),
    Job("purge_idempotency_keys", purge_expired_keys),
)


G = TypeVar("G", bound=Group)
T = TypeVar("T")


class _Group(Generic[G]):
    """A resource group of the handle, made on first use (most requests use one): an
    instance of its class as the handle guards it (`_guarded_class`, made once)."""

    def __init__(self, group: type[G]) -> None:
        self._group = group
        self._guarded: type[G] | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, handle: OrganizationHandle, owner: type | None = None) -> G:
        guarded = self._guarded
        if guarded is None:
            guarded = self._guarded = _guarded_class(self._group, self._name)
        group = guarded(handle.scope)
        group._handle = handle  # type: ignore[attr-defined]  # the guarded class's slot
        handle.__dict__[self._name] = group
        return group


def _guarded_class(group: type[G], name: str) -> type[G]:
    """A subclass of `group` whose public methods the instance's handle guards (`_guard`),
    each with its method's name, docstring and signature; the handle in its `_handle`."""
    namespace: dict[str, Any] = {
        method: _guard(group, name, method) for method in _public_methods(group)
    }
    namespace.update(
        __slots__=("_handle",),
        __module__=group.__module__,
        __qualname__=group.__qualname__,
        __doc__=group.__doc__,
    )
    return cast("type[G]", type(group.__name__, (group,), namespace))


def _guard(group: type, name: str, method: str) -> Callable[..., Any]:
    """`group.method` as the handle gives it out: a method of the table of operations runs
    through `OrganizationHandle.run`; another public method needs the ``admin`` scope.
    The method is read from `group` at each call (a patched method is still guarded)."""
    operation = _controls().get((name, method))

    if operation is None:

        def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
            self._handle.require("admin")
            return getattr(group, method)(self, *args, **kwargs)

    else:

        def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
            action = getattr(group, method)
            return self._handle.run(operation, lambda: action(self, *args, **kwargs), path=args)

    return functools.wraps(getattr(group, method))(guarded)


def _public_methods(group: type) -> tuple[str, ...]:
    """The public methods of a group's class."""
    return tuple(
        name
        for name in dir(group)
        if not name.startswith("_") and inspect.isfunction(getattr(group, name))
    )


@functools.cache
def _controls() -> dict[tuple[str, ...], Operation[Any]]:
    """Each method of the table of operations (a list's `chunks` too), by its group and
    name: its operation. Read when first needed (see `_idempotent_operations`)."""
    from .operations import OPERATIONS

    found: dict[tuple[str, ...], Operation[Any]] = {}
    for operation in OPERATIONS:
        if operation.public:
            continue
        found.setdefault(operation.method_path, operation)
        if operation.chunks_path is not None:
            found.setdefault(operation.chunks_path, operation)
    return found


#: `grants`, remembered for each held scopes and required scope (a handle's are a tuple).
_grants = functools.lru_cache(maxsize=256)(grants)


@functools.lru_cache(maxsize=256)
def _scopes(stored: str) -> tuple[str, ...]:
    """A key's scopes from their stored JSON text (a few distinct texts, each read once)."""
    return tuple(json.loads(stored))


def _initialized(storage: Storage) -> bool:
    """Whether the store was initialized before (its schema applied): its data may be
    encrypted with a master key. Read only."""
    try:
        with storage.read() as tx:
            return tx.one("SELECT version FROM schema_migrations LIMIT 1") is not None
    except Exception:  # no such table: a new store
        return False


class OrganizationHandle:
    """One organization's operations, grouped by resource, isolated to it."""

    wallets = _Group(Wallets)
    recipients = _Group(Recipients)
    bank_accounts = _Group(BankAccounts)
    webhooks = _Group(Webhooks)
    balances = _Group(Balances)
    swaps = _Group(Swaps)
    transactions = _Group(Transactions)
    yields = _Group(Yields)
    transfers = _Group(Transfers)
    virtual_account = _Group(VirtualAccountGroup)
    virtual_wallet = _Group(VirtualWalletGroup)
    test_helpers = _Group(TestHelpers)
    policy = _Group(Policies)
    audit_events = _Group(AuditEvents)
    ledger = _Group(Ledger)
    statements = _Group(Statements)
    reconciliation = _Group(ReconciliationGroup)

    def __init__(
        self,
        scope: Scope,
        api_key_id: str | None = None,
        scopes: Sequence[str] = DEFAULT,
    ):
        self.scope = scope
        self.id = scope.org_id
        self.user_id = scope.user_id
        self.api_key_id = api_key_id
        #: What the key may do (`treasury.admin.scopes`); ``admin`` without a key.
        self.scopes = tuple(scopes)
        self.quota: Quota | None = None  # set by `Treasury.authenticate`

    def require(self, scope: str | None) -> None:
        """Nothing if the key's scopes grant `scope`, else the 403 naming it."""
        if scope is not None and not _grants(self.scopes, scope):
            raise Forbidden(required_scope=scope)

    def run(
        self,
        operation: Operation[Any],
        action: Callable[[], T],
        *,
        path: Sequence[Any] | Mapping[str, Any] = (),
        request_id: str | None = None,
    ) -> T:
        """Run `action`, a call of `operation` (an `Operation` of the table) with its
        `path` parameters, as this handle: its scope checked first, and audited when it
        changes state (refused calls too). A front end runs its requests through here
        with their `request_id`: a refused request that changes nothing (a read) is
        recorded too. The groups' methods run through here as well, and within a request
        they are part of it."""
        if not operation.mutating:
            if request_id is None:  # a read from Python: a refusal is the caller's exception
                self.require(operation.scope)
                return action()
            try:
                self.require(operation.scope)
                return action()
            except Exception as error:
                self.refused(operation, error, path=path, request_id=request_id)
                raise
        if audit.running():  # within a request (HTTP): part of its call
            self.require(operation.scope)
            return audit.within(action)
        call = self._call(operation, path, request_id)

        def checked() -> T:
            self.require(operation.scope)
            return action()

        return audit.run(call, checked)

    def refused(
        self,
        operation: Operation[Any],
        error: Exception,
        *,
        path: Sequence[Any] | Mapping[str, Any] = (),
        request_id: str | None = None,
    ) -> None:
        """Record a request of `operation` refused with `error` (its status; 500 for what
        is not a `TreasuryError`) in the organization's audit log, naming the object its
        `path` names: what a front end does for a refusal that never reached `run` (a key
        past its rate limit). Never raises."""
        audit.refused(self._call(operation, path, request_id), error)

    def _call(
        self,
        operation: Operation[Any],
        path: Sequence[Any] | Mapping[str, Any],
        request_id: str | None,
    ) -> audit.Call:
        return audit.Call(
            runtime=self.scope.runtime,
            org_id=self.id,
            actor=audit.ADMIN
            if self.api_key_id is None
            else audit.Actor(self.api_key_id, self.user_id),
            operation=operation.name,
            object_type=operation.object_type,
            status=operation.status,
            request_id=request_id,
            object_id=operation.object_id(path),
            identify=lambda result: operation.object_id((), result),
        )

    def require_chain(self, chain_id: int) -> None:
        """Nothing if `chain_id` is configured, else the 404 of an unsupported chain."""
        self.scope.runtime.chains.require(chain_id)

    def __repr__(self) -> str:
        return f"<treasury.OrganizationHandle {self.id} user={self.user_id!r}>"


class Treasury:
    """The treasury service. Thread-safe: one instance serves a threaded server and a worker."""

    def __init__(self, runtime: Runtime, settings: Settings):
        self._runtime = runtime
        self.settings = settings
        self._shown = type(runtime.storage).__name__  # `open` puts the URL, password hidden
        self.admin = Admin(runtime)
        self.yield_artifacts = YieldArtifacts(runtime)
        self.rate_limiter = RateLimiter(
            settings.rate_limit, settings.rate_limit_storage, settings.anonymous_rate_limit
        )

    @classmethod
    def open(
        cls,
        storage: str | Storage | None = None,
        *,
        chains: Mapping[int, ChainSpec] | None = None,
        fiat: str | FiatProvider | None = None,
        custody: str | Custody | None = None,
        master_key: str | bytes | None = None,
        allow_private_webhook_urls: bool | None = None,
        clock: Clock | None = None,
        rate_limit: str | None = None,
        rate_limit_storage: str | None = None,
        settings: Settings | None = None,
    ) -> Treasury:
        """Open (and migrate) a treasury. Arguments win over `TREASURY_*`, then defaults.

        Backends are URLs whose scheme names an entry point, or instances (which win).
        """
        urls = {
            "storage": storage if isinstance(storage, str) else None,
            "fiat": fiat if isinstance(fiat, str) else None,
            "custody": custody if isinstance(custody, str) else None,
            "allow_private_webhook_urls": allow_private_webhook_urls,
            "rate_limit": rate_limit,
            "rate_limit_storage": rate_limit_storage,
            "chains": chains,
        }
        settings = (settings or Settings.load()).merged(
            {k: v for k, v in urls.items() if v is not None}
        )
        clock = clock or system_clock
        store = plugins.resolve("storage", storage or settings.storage, Storage)
        key = master_key if master_key is not None else settings.master_key
        secrets = SecretBox(
            resolve_master_key(
                key, store.key_file, durable=store.durable, has_data=lambda: _initialized(store)
            )
        )
        custodian = plugins.resolve("custody", custody or settings.custody, Custody)
        custodian.bind(CustodyContext(store, secrets.key_for(CUSTODY_KEYS), clock))
        runtime = Runtime(
            storage=store,
            secrets=secrets,
            custody=custodian,
            fiat=plugins.resolve("fiat", fiat or settings.fiat, FiatProvider),
            clock=clock,
            chains=ChainRegistry(
                settings.chains,
                settings.primary_chain,
                str(store.key_file.with_suffix("")) if store.key_file else None,
            ),
            signer=Signer(custodian),
            operation_names=_idempotent_operations(),
            sealed_outcomes=_sealed_outcomes(),
            allow_private_webhook_urls=settings.allow_private_webhook_urls,
            sweep_minimum=settings.sweep_minimum,
            snapshot_interval=settings.snapshot_interval,
            reconcile_interval=settings.reconcile_interval,
            deposit_confirmations=settings.deposit_confirmations,
            max_in_flight=settings.max_in_flight,
        )
        runtime.fiat.bind(
            FiatContext(runtime.chains.get, store, secrets.derive("encrypt:fiat-plugin"))
        )
        keyed = audit.audit_key(secrets)
        migrate(
            store,
            now=runtime.now_text(),
            steps={
                20: lambda tx: audit.rekey(tx, keyed),
                22: lambda tx: journal_history.post_history(tx, runtime),
            },
        )
        treasury = cls(runtime, settings)
        if not isinstance(storage, Storage):
            treasury._shown = plugins.redacted(settings.storage)
        return treasury

    def for_api_key(self, secret: str | None) -> OrganizationHandle:
        """The organization a key belongs to; 401-type errors exactly as the specification."""
        key = self.admin.verified(secret)
        scopes = _scopes(key["scopes"])
        scope = Scope(self._runtime, key["org_id"], key["user_id"], key["id"], scopes)
        return OrganizationHandle(scope, key["id"], scopes)

    def authenticate(
        self,
        secret: str | None,
        *,
        client: str = "unknown",
        operation: Operation[Any] | None = None,
        path: Sequence[Any] | Mapping[str, Any] = (),
        request_id: str | None = None,
    ) -> OrganizationHandle:
        """`for_api_key` plus one request counted (HTTP use): against the key, whose
        standing is the handle's `quota`; or, when the key is refused, against the
        `client` address, which past its own limit is answered 429 instead of 401. A
        valid key past its limit is refused with `RateLimited`, recorded in its
        organization's audit log as a refused request of `operation` (with its `path`
        and `request_id`) when the front end names it."""
        try:
            org = self.for_api_key(secret)
        except AuthenticationError:
            self.rate_limiter.hit_address(client)
            raise
        assert org.api_key_id is not None
        try:
            org.quota = self.rate_limiter.hit_key(org.api_key_id)
        except RateLimited as limited:
            if operation is not None:
                org.refused(operation, limited, path=path, request_id=request_id)
            raise
        return org

    def for_organization(self, org_id: str, *, user_id: str = "system") -> OrganizationHandle:
        """Trusted in-process access to an organization, without an API key."""
        self.admin.get_organization(org_id)
        return OrganizationHandle(Scope(self._runtime, org_id, user_id))

    def verify_audit_log(
        self, checkpoint: Sequence[Mapping[str, Any]] | None = None
    ) -> tuple[int, BrokenLink | None]:
        """Check every organization's audit chain: the number of events checked and the
        first broken link (None when every chain holds). `checkpoint`: the entries of an
        `audit_checkpoint` taken before; each chain must still reach its entry."""
        runtime = self._runtime
        audit.seal_pending(runtime)  # what is still pending, first
        checked, broken = verify_chains(runtime.storage, audit.audit_key(runtime.secrets))
        if broken is None and checkpoint is not None:
            broken = checkpoints.check(runtime.storage, runtime.secrets, checkpoint)
        return checked, broken

    def audit_checkpoint(self, org_id: str | None = None) -> list[dict[str, Any]]:
        """A signed checkpoint of every organization's chain (or `org_id`'s): keep it
        outside the database, and pass it to `verify_audit_log` later."""
        if org_id is not None:
            self.admin.get_organization(org_id)
        audit.seal_pending(self._runtime, org_id)
        return checkpoints.take(self._runtime.storage, self._runtime.secrets, org_id)

    def audit_public_key(self) -> str:
        """The base64 Ed25519 public key that checks the checkpoints' signatures."""
        return checkpoints.public_key(self._runtime.secrets)

    def close_yield_period(self, chain_id: int | None = None) -> YieldPeriod | None:
        """Try a distribution now, on a chain that can mint (default: the primary chain):
        snapshot, close the current period a moment later and publish it (its root posted).
        The period stays closed for the rest of its week. The published period, or None
        when no holder earned anything; `Conflict` on another chain or a closed period."""
        return trial.close_current_period(self._runtime, self._chain_or_primary(chain_id))

    def why_no_yield_period(self, chain_id: int | None = None) -> str:
        """Why a chain (default: the primary chain) has no period to publish now."""
        return trial.why_nothing(self._runtime, self._chain_or_primary(chain_id))

    def _chain_or_primary(self, chain_id: int | None) -> int:
        chains = self._runtime.chains
        return chains.primary if chain_id is None else chains.require(chain_id)

    def chain(self, chain_id: int) -> Any:
        """The backend of a configured chain (the devnet adds `faucet`); 404 if unknown."""
        return self._runtime.chains.get(chain_id)

    def decimals(self, chain_id: int, token: str) -> int:
        """The decimals of a token of a configured chain (its key, such as ``"c0"``, or
        its address), as the token answers them: read once per chain, then cached."""
        return self._runtime.chains.decimals(chain_id, token)

    def run_once(self, only: Sequence[str] | None = None) -> RunSummary:
        """One pass of every background job (`JOBS`, in order), each isolated: a failing
        job, or a failing part of one (a chain), is reported and the rest goes on.
        `only`: the names of the jobs to run (still in `JOBS` order)."""
        unknown = set(only or ()) - {job.name for job in JOBS}
        if unknown:
            raise ValueError(f"unknown jobs: {', '.join(sorted(unknown))}")
        return run_pass(self._runtime, [j for j in JOBS if only is None or j.name in only])

    def run_in_background(
        self,
        interval: float = 5.0,
        on_pass: Callable[[RunSummary], None] | None = None,
    ) -> BackgroundWorker:
        """Passes of `run_once` every `interval` seconds in a daemon thread, started; what
        `treasury serve` runs. Call `.stop()` (or use it as a context manager) to end it.
        The chains are opened first, in the caller's thread (a chain that fails to open
        is left to the jobs, which report it)."""
        for chain_id in self._runtime.chains.ids():
            with contextlib.suppress(Exception):
                self._runtime.chains.get(chain_id)
        return BackgroundWorker(self.run_once, interval, on_pass).start()

    def now(self) -> datetime:
        return self._runtime.now()

    @property
    def storage(self) -> Storage:
        return self._runtime.storage

    def __repr__(self) -> str:
        chains = ", ".join(str(c) for c in sorted(self.settings.chains))
        return f"<treasury.Treasury storage={self._shown} chains=[{chains}]>"

    def close(self) -> None:
        self._runtime.chains.close()
        self._runtime.storage.close()
        self.rate_limiter.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _idempotent_operations() -> dict[tuple[str, ...], str]:
    """The table's name of each operation that takes an Idempotency-Key, by its method.
    The table is imported here, when a treasury opens: `import treasury` alone leaves
    `treasury.operations` unloaded (it is not a public module)."""
    from .operations import OPERATIONS

    return {op.method_path: op.name for op in OPERATIONS if op.idempotency is not None}


def _sealed_outcomes() -> dict[type, Callable[[Any], bool]]:
    """The table's sealing rule of each answer an idempotent operation may store with a
    secret (a created webhook, a bank account, a transfer with deposit instructions)."""
    from .operations import OPERATIONS

    rules: dict[type, Callable[[Any], bool]] = {}
    for op in OPERATIONS:
        if op.sealed is not None:
            assert rules.get(op.response, op.sealed) is op.sealed, op.name  # one rule a class
            rules[op.response] = op.sealed
    return rules
