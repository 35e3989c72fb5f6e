"""The audit log as read: its events, newest first, and the check of every chain."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import AuditActor, AuditEvent

if _typing.TYPE_CHECKING:
    from .operations import AuditEvents
    from .verify import BrokenLink, verify_chains


__all__ = ["AuditActor", "AuditEvent", "AuditEvents", "BrokenLink", "verify_chains"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(
    __name__, {"AuditEvents": ".operations", "BrokenLink": ".verify", "verify_chains": ".verify"}
)
