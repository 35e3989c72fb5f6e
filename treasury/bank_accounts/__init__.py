"""Bank accounts: registered with the fiat provider, numbers encrypted at rest."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import BankAccount, BankAccountRow, CreateBankAccount, UpdateBankAccount

if _typing.TYPE_CHECKING:
    from .._records.bank_accounts import BankAccountSummary
    from .operations import BankAccounts


__all__ = [
    "BankAccount",
    "BankAccountRow",
    "BankAccountSummary",
    "BankAccounts",
    "CreateBankAccount",
    "UpdateBankAccount",
]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(
    __name__, {"BankAccounts": ".operations", "BankAccountSummary": ".._records.bank_accounts"}
)
