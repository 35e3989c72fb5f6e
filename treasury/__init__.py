"""treasury — an embeddable treasury API for organizations.

>>> from treasury import Treasury
>>> t = Treasury.open("sqlite:///:memory:")
>>> org = t.admin.create_organization("Acme")
"""

from ._infra.jobs import RunSummary
from ._treasury import OrganizationHandle, Treasury
from .config import Settings
from .errors import (
    AuthenticationError,
    Conflict,
    IdempotencyInFlight,
    IdempotencyKeyReused,
    NotFound,
    RateLimited,
    TreasuryError,
    UpstreamError,
    ValidationError,
)

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "Conflict",
    "IdempotencyInFlight",
    "IdempotencyKeyReused",
    "NotFound",
    "OrganizationHandle",
    "RateLimited",
    "RunSummary",
    "Settings",
    "Treasury",
    "TreasuryError",
    "UpstreamError",
    "ValidationError",
]
