"""Recipients: saved addresses with labels, one per address in an organization."""

from .models import CreateRecipient, Recipient, UpdateRecipient
from .operations import Recipients

__all__ = ["CreateRecipient", "Recipient", "Recipients", "UpdateRecipient"]
