"""Test helpers: a faucet on chains that can mint (the devnet, `treasury devnet`)."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import Faucet, Funded

if _typing.TYPE_CHECKING:
    from .operations import TestHelpers


__all__ = ["Faucet", "Funded", "TestHelpers"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"TestHelpers": ".operations"})
