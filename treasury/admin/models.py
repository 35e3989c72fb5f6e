"""Organizations and API keys as the admin operations return them."""

from __future__ import annotations

from datetime import datetime

from .._infra.models import Resource


class Organization(Resource):
    id: str
    name: str
    created_at: datetime


class FiatOnboarding(Resource):
    """Where an organization's onboarding with the fiat provider stands: the provider's
    status (``approved`` once fiat operations may run) and the hosted KYB page where the
    business completes it (None where there is none)."""

    status: str
    url: str | None


class ApiKey(Resource):
    """An API key as listed: never its secret."""

    id: str
    organization_id: str
    user_id: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    #: What it may do: ``read``, ``payments``, ``approve``, ``admin`` (`treasury.admin.scopes`).
    scopes: list[str]


class CreatedApiKey(ApiKey):
    """The creation result: `secret` is shown this once and stored only as a hash."""

    secret: str
