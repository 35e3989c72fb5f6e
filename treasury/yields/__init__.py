"""Yield: projections of a `c0` balance from the live earner rate."""

from .models import YieldEstimate, YieldRate
from .operations import Projection, Yields, project

__all__ = ["Projection", "YieldEstimate", "YieldRate", "Yields", "project"]
