"""Pydantic models of every request body and response resource of the API."""

from .admin import ApiKey, CreatedApiKey, Organization
from .bank_accounts import BankAccount, BankAccountRow, BankAccountSummary, CreateBankAccount
from .common import Address, Deleted, Label, ListOf, ListQuery
from .recipients import CreateRecipient, Recipient
from .wallets import CreateWallet, TrackedWallet, TrackedWalletResponse, TrackWallet, Wallet
from .webhooks import CreatedWebhook, CreateWebhook, Webhook

__all__ = [
    "Address",
    "ApiKey",
    "BankAccount",
    "BankAccountRow",
    "BankAccountSummary",
    "CreateBankAccount",
    "CreateRecipient",
    "CreateWallet",
    "CreateWebhook",
    "CreatedApiKey",
    "CreatedWebhook",
    "Deleted",
    "Label",
    "ListOf",
    "ListQuery",
    "Organization",
    "Recipient",
    "TrackWallet",
    "TrackedWallet",
    "TrackedWalletResponse",
    "Wallet",
    "Webhook",
]
