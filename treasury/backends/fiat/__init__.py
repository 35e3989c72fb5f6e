from .base import (
    APPROVED,
    FAILED_STATES,
    FINAL_STATES,
    BankDeposit,
    ExternalAccount,
    FiatContext,
    FiatProvider,
    OffRamp,
    Onboarding,
    OnRamp,
    ProviderTransfer,
    VirtualAccount,
)

__all__ = [
    "APPROVED",
    "FAILED_STATES",
    "FINAL_STATES",
    "BankDeposit",
    "ExternalAccount",
    "FiatContext",
    "FiatProvider",
    "OffRamp",
    "OnRamp",
    "Onboarding",
    "ProviderTransfer",
    "VirtualAccount",
]
