"""Administration: organizations and API keys (the dashboard's side of the service)."""

from .models import ApiKey, CreatedApiKey, FiatOnboarding, Organization
from .operations import Admin

__all__ = ["Admin", "ApiKey", "CreatedApiKey", "FiatOnboarding", "Organization"]
