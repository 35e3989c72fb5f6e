"""`Treasury`: the framework-agnostic core that every front end (HTTP, CLI, notebooks) uses."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from . import _plugins
from ._chain_registry import ChainRegistry, ChainSpec
from ._clock import Clock, system_clock
from ._crypto import SecretBox, resolve_master_key
from ._idempotency import purge_expired
from ._ratelimit import RateLimiter
from ._runtime import Runtime, Scope
from ._schema import migrate
from .admin import Admin
from .backends.custody.base import Custody
from .backends.fiat.base import FiatProvider
from .backends.storage.base import Storage
from .config import Settings
from .errors import TreasuryError
from .indexer import index_chain
from .ops.balances import Balances
from .ops.bank_accounts import BankAccounts
from .ops.recipients import Recipients
from .ops.signing import Signer
from .ops.swaps import Swaps
from .ops.transactions import Transactions
from .ops.wallets import Wallets
from .ops.webhooks import Webhooks
from .ops.yields import Yields

log = logging.getLogger("treasury")


class Organization:
    """One organization's handle: every operation, isolated to that organization."""

    def __init__(self, scope: Scope, api_key_id: str | None = None):
        self.id = scope.org_id
        self.user_id = scope.user_id
        self.api_key_id = api_key_id
        self.wallets = Wallets(scope)
        self.recipients = Recipients(scope)
        self.bank_accounts = BankAccounts(scope)
        self.webhooks = Webhooks(scope)
        self.balances = Balances(scope)
        self.swaps = Swaps(scope)
        self.transactions = Transactions(scope)
        self.yields = Yields(scope)

    def __repr__(self) -> str:
        return f"<treasury.Organization {self.id}>"


@dataclass
class RunSummary:
    """What one `run_once` pass did."""

    transactions_confirmed: int = 0
    transactions_failed: int = 0
    idempotency_keys_purged: int = 0
    errors: dict[str, str] = field(default_factory=dict)


class Treasury:
    """The treasury service. Thread-safe: one instance serves a threaded server and a worker."""

    def __init__(self, runtime: Runtime, settings: Settings):
        self._runtime = runtime
        self.settings = settings
        self.admin = Admin(runtime)
        self.rate_limiter = RateLimiter(settings.rate_limit, settings.rate_limit_storage)

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
        store = _plugins.resolve("storage", storage or settings.storage, Storage)
        key = master_key if master_key is not None else settings.master_key
        secrets = SecretBox(resolve_master_key(key, store.key_file))
        custodian = _plugins.resolve("custody", custody or settings.custody, Custody)
        custodian.bind(storage=store, secrets=secrets)
        runtime = Runtime(
            storage=store,
            secrets=secrets,
            custody=custodian,
            fiat=_plugins.resolve("fiat", fiat or settings.fiat, FiatProvider),
            clock=clock or system_clock,
            chains=ChainRegistry(settings.chains),
            signer=Signer(custodian),
            allow_private_webhook_urls=settings.allow_private_webhook_urls,
        )
        migrate(store, now=runtime.now_text())
        return cls(runtime, settings)

    def for_api_key(self, secret: str | None) -> Organization:
        """The organization a key belongs to; 401-type errors exactly as the specification."""
        key = self.admin.verify_api_key(secret)
        return Organization(Scope(self._runtime, key.organization_id, key.user_id), key.id)

    def authenticate(self, secret: str | None) -> Organization:
        """`for_api_key` plus one request counted against the key's rate limit (HTTP use)."""
        org = self.for_api_key(secret)
        assert org.api_key_id is not None
        self.rate_limiter.hit(org.api_key_id)
        return org

    def for_organization(self, org_id: str, *, user_id: str = "system") -> Organization:
        """Trusted in-process access to an organization, without an API key."""
        self.admin.get_organization(org_id)
        return Organization(Scope(self._runtime, org_id, user_id))

    def chain(self, chain_id: int) -> Any:
        """The backend of a configured chain (the devnet adds `faucet`); 404 if unknown."""
        return self._runtime.chains.get(chain_id)

    def run_once(self) -> RunSummary:
        """One pass of background work: index pending transactions on every chain, purge
        expired idempotency keys. A failing chain is reported and does not stop the rest."""
        summary = RunSummary()
        for chain_id in self._runtime.chains.ids():
            try:
                indexed = index_chain(self._runtime, chain_id)
            except Exception as error:  # one chain's outage must not stop the others
                message = error.message if isinstance(error, TreasuryError) else repr(error)
                log.warning("indexing chain %s failed: %s", chain_id, message, exc_info=True)
                summary.errors[f"chain {chain_id}"] = message
                continue
            summary.transactions_confirmed += indexed.confirmed
            summary.transactions_failed += indexed.failed
        with self._runtime.storage.transaction() as tx:
            summary.idempotency_keys_purged = purge_expired(tx, self._runtime.now_text())
        return summary

    def now(self) -> datetime:
        return self._runtime.now()

    @property
    def storage(self) -> Storage:
        return self._runtime.storage

    def close(self) -> None:
        self._runtime.chains.close()
        self._runtime.storage.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
