"""Recipients: saved addresses with labels, one per address in an organization."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import CreateRecipient, Recipient, UpdateRecipient

if _typing.TYPE_CHECKING:
    from .operations import Recipients


__all__ = ["CreateRecipient", "Recipient", "Recipients", "UpdateRecipient"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(__name__, {"Recipients": ".operations"})
