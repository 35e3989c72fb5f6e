"""Bank accounts: registered with the fiat provider, numbers encrypted at rest."""

from .._records.bank_accounts import BankAccountSummary
from .models import BankAccount, BankAccountRow, CreateBankAccount
from .operations import BankAccounts

__all__ = [
    "BankAccount",
    "BankAccountRow",
    "BankAccountSummary",
    "BankAccounts",
    "CreateBankAccount",
]
