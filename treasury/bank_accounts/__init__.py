"""Bank accounts: registered with the fiat provider, numbers encrypted at rest."""

from .models import BankAccount, BankAccountRow, BankAccountSummary, CreateBankAccount
from .operations import BankAccounts

__all__ = [
    "BankAccount",
    "BankAccountRow",
    "BankAccountSummary",
    "BankAccounts",
    "CreateBankAccount",
]
