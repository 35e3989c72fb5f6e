"""Administration: organizations and API keys (the dashboard's side of the service).

Each change here is an admin action: it appends an audit event of the organization, by
``{"admin": true}``, in the transaction of the change (`_audited`)."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterable
from datetime import datetime

from .._infra import audit
from .._infra.clock import to_text
from .._infra.crypto import hash_secret, same_secret
from .._infra.identity import user_id_problem
from .._infra.models import plain_text
from .._infra.runtime import Runtime
from .._records import customers
from ..backends.storage.base import Row, Transaction
from ..errors import AuthenticationError, NotFound, ValidationError
from .key_cache import KeyCache
from .models import ApiKey, CreatedApiKey, FiatOnboarding, Organization
from .scopes import checked

KEY_PREFIX = "trk_"
_KEY_COLUMNS = "id, org_id, user_id, secret_hash, created_at, expires_at, revoked_at, scopes"


def _check_text(field: str, value: str) -> None:
    try:
        plain_text(value)
    except ValueError as error:
        raise ValidationError.field("body", field, str(error)) from None


def _api_key(row: Row) -> ApiKey:
    return ApiKey.model_validate(
        row | {"organization_id": row["org_id"], "scopes": json.loads(row["scopes"])}
    )


class Admin:
    """Trusted operations: nothing here is reachable through the /v1 API."""

    def __init__(self, runtime: Runtime):
        self._runtime = runtime
        self._keys = KeyCache(runtime.clock)

    def create_organization(self, name: str) -> Organization:
        if not isinstance(name, str) or not 1 <= len(name.strip()) <= 200:
            raise ValidationError.field("body", "name", "must be 1 to 200 characters")
        _check_text("name", name)
        org = Organization(id=str(uuid.uuid4()), name=name.strip(), created_at=self._runtime.now())
        with self._runtime.storage.transaction() as tx:
            tx.execute(
                "INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)",
                (org.id, org.name, to_text(org.created_at)),
            )
            self._audited(tx, org.id, "create_organization", "organization", org.id, 201)
        return org

    def get_organization(self, org_id: str) -> Organization:
        with self._runtime.storage.read() as tx:
            row = tx.one("SELECT id, name, created_at FROM organizations WHERE id = ?", (org_id,))
        if row is None:
            raise NotFound("Organization not found")
        return Organization.model_validate(row)

    def list_organizations(self) -> list[Organization]:
        with self._runtime.storage.read() as tx:
            rows = tx.query("SELECT id, name, created_at FROM organizations ORDER BY created_at")
        return [Organization.model_validate(row) for row in rows]

    def start_onboarding(self, org_id: str, *, email: str | None = None) -> FiatOnboarding:
        """Create the organization's fiat provider customer through the provider's hosted
        KYB link (`email`: the business's contact, where the provider asks for one) and
        return ``{status, url}``; once started, where it stands. Fiat operations of the
        organization answer 409 until the status is ``approved``."""
        found = customers.start_onboarding(self._runtime, org_id, email)
        with self._runtime.storage.transaction() as tx:  # after the provider's answer
            self._audited(tx, org_id, "start_onboarding", "organization", org_id, 200)
        return FiatOnboarding(status=found.status, url=found.url)

    def onboarding(self, org_id: str) -> FiatOnboarding:
        """Where the organization's fiat onboarding stands, read again from the provider
        (``not_started`` before `start_onboarding` or a first fiat operation)."""
        with self._runtime.storage.read() as tx:
            known = customers.organization(tx, org_id)
        found = customers.onboarding(self._runtime, org_id, known, start=False)
        return FiatOnboarding(status=found.status, url=found.url)

    def create_api_key(
        self,
        org_id: str,
        *,
        user_id: str,
        expires_at: datetime | None = None,
        scopes: Iterable[str] | None = None,
    ) -> CreatedApiKey:
        """A new key for `org_id` acting as `user_id`; its secret is returned this once.
        `scopes`: what it may do (``read``, ``payments``, ``approve``, ``admin``); None
        means ``["admin"]``; an unknown scope is a 400 naming it."""
        try:
            granted = checked(scopes)
        except ValueError as error:
            raise ValidationError.field("body", "scopes", str(error)) from None
        self.get_organization(org_id)
        if not isinstance(user_id, str) or not 1 <= len(user_id) <= 200:
            raise ValidationError.field("body", "user_id", "must be 1 to 200 characters")
        _check_text("user_id", user_id)
        if problem := user_id_problem(user_id):
            raise ValidationError.field("body", "user_id", problem)
        if expires_at is not None and expires_at.tzinfo is None:
            raise ValidationError.field("body", "expires_at", "must be timezone-aware")
        key_id = "key_" + secrets.token_hex(8)
        secret = f"{KEY_PREFIX}{key_id[4:]}_{secrets.token_urlsafe(32)}"
        now = self._runtime.now()
        with self._runtime.storage.transaction() as tx:
            tx.execute(
                f"INSERT INTO api_keys ({_KEY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
                (
                    key_id,
                    org_id,
                    user_id,
                    hash_secret(secret),
                    to_text(now),
                    None if expires_at is None else to_text(expires_at),
                    json.dumps(granted),
                ),
            )
            self._audited(tx, org_id, "create_api_key", "api_key", key_id, 201)
        return CreatedApiKey(
            id=key_id,
            organization_id=org_id,
            user_id=user_id,
            created_at=now,
            expires_at=expires_at,
            revoked_at=None,
            scopes=granted,
            secret=secret,
        )

    def list_api_keys(self, org_id: str | None = None) -> list[ApiKey]:
        where, params = ("WHERE org_id = ?", (org_id,)) if org_id else ("", ())
        with self._runtime.storage.read() as tx:
            rows = tx.query(
                f"SELECT {_KEY_COLUMNS} FROM api_keys {where} ORDER BY created_at", params
            )
        return [_api_key(row) for row in rows]

    def revoke_api_key(self, key_id: str) -> ApiKey:
        with self._runtime.storage.transaction() as tx:
            revoked = tx.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (self._runtime.now_text(), key_id),
            )
            row = tx.one(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
            if revoked and row is not None:
                self._audited(tx, row["org_id"], "revoke_api_key", "api_key", key_id, 200)
        self._keys.forget(key_id)
        if row is None:
            raise NotFound("API key not found")
        return _api_key(row)

    def _audited(
        self,
        tx: Transaction,
        org_id: str,
        action: str,
        object_type: str,
        object_id: str,
        status: int,
    ) -> None:
        """Append the admin action's audit event in `tx`, the transaction of its change."""
        audit.append(
            tx,
            self._runtime,
            org_id,
            actor=audit.ADMIN,
            operation=f"admin.{action}",
            object_type=object_type,
            object_id=object_id,
            status=status,
        )

    def verify_api_key(self, secret: str | None) -> ApiKey:
        """The key a secret belongs to, or the specification's 401 for it."""
        return _api_key(self.verified(secret))

    def verified(self, secret: str | None) -> Row:
        """The stored row of the key a secret belongs to (`id`, `org_id`, `user_id`,
        `scopes` as JSON text, ...), or the 401 for it: API key required / Unauthorized /
        API key expired. The row may be up to `key_cache.KEY_TTL` old (a revocation
        elsewhere takes that long here)."""
        if not secret:
            raise AuthenticationError("API key required")
        key_id = _key_id(secret)
        row = self._keys.get(key_id)
        if row is None:
            read_at = self._runtime.now()
            row = self._runtime.storage.read_one(
                f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ?", (key_id,)
            )
            if row is not None and same_secret(secret, row["secret_hash"]):
                self._keys.keep(key_id, row, read_at)
        if row is None or not same_secret(secret, row["secret_hash"]) or row["revoked_at"]:
            raise AuthenticationError("Unauthorized")
        if row["expires_at"] is not None and row["expires_at"] <= self._runtime.now_text():
            raise AuthenticationError("API key expired")
        return row


def _key_id(secret: str) -> str:
    """`trk_<id>_<random>` names its key's id; anything else names none."""
    body = secret.removeprefix(KEY_PREFIX)
    key_id, _, rest = body.partition("_")
    if body == secret or not rest:
        return "key_-"
    return "key_" + key_id
