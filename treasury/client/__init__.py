"""A typed httpx client of a remote treasury's /v1 API: the same groups, models and
errors as the library (`TreasuryClient`)."""

from ._client import TreasuryClient

__all__ = ["TreasuryClient"]
