from .base import (
    FINAL_STATES,
    BankDeposit,
    ExternalAccount,
    FiatContext,
    FiatProvider,
    OffRamp,
    OnRamp,
    ProviderTransfer,
    VirtualAccount,
)

__all__ = [
    "FINAL_STATES",
    "BankDeposit",
    "ExternalAccount",
    "FiatContext",
    "FiatProvider",
    "OffRamp",
    "OnRamp",
    "ProviderTransfer",
    "VirtualAccount",
]
