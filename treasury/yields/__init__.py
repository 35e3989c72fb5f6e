"""Yield: projections of a `c0` balance from the live earner rate."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import YieldEstimate, YieldRate

if _typing.TYPE_CHECKING:
    from .operations import Projection, Yields, project


__all__ = ["Projection", "YieldEstimate", "YieldRate", "Yields", "project"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(
    __name__, {"Projection": ".operations", "Yields": ".operations", "project": ".operations"}
)
