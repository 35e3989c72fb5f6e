"""The organization's policy: approval threshold, daily limit, known destinations."""

from .models import Policy, SetPolicy
from .operations import Policies

__all__ = ["Policies", "Policy", "SetPolicy"]
