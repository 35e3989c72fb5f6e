"""The organization's policy: approval threshold, daily limit, known destinations."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import Policy, SetPolicy

if _typing.TYPE_CHECKING:
    from .operations import Policies


__all__ = ["Policies", "Policy", "SetPolicy"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"Policies": ".operations"})
