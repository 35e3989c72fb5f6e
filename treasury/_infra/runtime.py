"""What every operation works with: the backends, the secret box, the clock, the settings;
and `Scope`, one organization's view of them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..backends.custody.base import Custody
from ..backends.fiat.base import FiatProvider
from ..backends.storage.base import Storage
from ..evm.signing import Signer
from .chains import ChainRegistry
from .clock import Clock, to_text
from .crypto import SecretBox
from .logs import Conditions


@dataclass(frozen=True)
class Runtime:
    storage: Storage
    secrets: SecretBox
    custody: Custody
    fiat: FiatProvider
    clock: Clock
    chains: ChainRegistry
    signer: Signer
    #: The name of each operation that takes an Idempotency-Key, by its group and method
    #: (``("transfers", "create")``), as the table of operations gives it: the first part
    #: of the idempotency fingerprint.
    operation_names: Mapping[tuple[str, ...], str]
    #: How the idempotency store keeps an answer's stored outcome, by the answer's class:
    #: sealed (encrypted) when the rule says the answer holds a secret, as the table of
    #: operations declares it (`Operation.sealed`); a class not named: in the clear.
    sealed_outcomes: Mapping[type, Callable[[Any], bool]] = field(default_factory=dict)
    deposit_confirmations: int | None = None  # None: each chain's (`Chain.confirmations`)
    allow_private_webhook_urls: bool = False
    sweep_minimum: str = "1.00"
    snapshot_interval: int = 3600  # seconds between yield snapshots
    #: Signed legs a wallet keeps in flight (unmined) at most; further transfers queue.
    max_in_flight: int = 64
    reconcile_interval: int = 600  # seconds between reconciliation runs of a chain
    #: Standing conditions of the background jobs, logged when they start or change.
    conditions: Conditions = field(
        default_factory=lambda: Conditions(logging.getLogger("treasury.jobs")),
        compare=False,
    )

    def now(self) -> datetime:
        return self.clock()

    def now_text(self) -> str:
        return to_text(self.clock())


@dataclass(frozen=True)
class Scope:
    """One organization's view: every query an operation makes is filtered by `org_id`."""

    runtime: Runtime
    org_id: str
    user_id: str
    #: The API key acting (None: trusted in-process access, `Treasury.for_organization`).
    api_key_id: str | None = None
    #: The scopes of the key acting (`treasury.admin.scopes`); ``admin`` without a key.
    scopes: tuple[str, ...] = ("admin",)

    @property
    def admin(self) -> bool:
        """Whether the caller holds scope ``admin``."""
        return "admin" in self.scopes
