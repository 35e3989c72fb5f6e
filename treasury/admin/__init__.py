"""Administration: organizations and API keys (the dashboard's side of the service)."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import ApiKey, CreatedApiKey, FiatOnboarding, Organization

if _typing.TYPE_CHECKING:
    from .operations import Admin


__all__ = ["Admin", "ApiKey", "CreatedApiKey", "FiatOnboarding", "Organization"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"Admin": ".operations"})
