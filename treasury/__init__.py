"""treasury — an embeddable treasury API for organizations.

>>> from treasury import Treasury
>>> t = Treasury.open("sqlite:///:memory:")
>>> org = t.admin.create_organization("Acme")

`Treasury`, `OrganizationHandle` and `RunSummary` are imported on first use, so that
``import treasury.client`` (models and errors only) does not load the core.
"""

import importlib as _importlib
import typing as _typing

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

if _typing.TYPE_CHECKING:
    from ._infra.jobs import RunSummary
    from ._treasury import OrganizationHandle, Treasury

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

#: The names imported on first use, and the module each comes from.
_LAZY = {"Treasury": "._treasury", "OrganizationHandle": "._treasury", "RunSummary": "._infra.jobs"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
