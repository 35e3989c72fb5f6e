"""The audit log as read: its events, newest first, and the check of every chain."""

from .models import AuditActor, AuditEvent
from .operations import AuditEvents
from .verify import BrokenLink, verify_chains

__all__ = ["AuditActor", "AuditEvent", "AuditEvents", "BrokenLink", "verify_chains"]
