from .base import (
    FINAL_STATES,
    BankDeposit,
    ExternalAccount,
    FiatContext,
    FiatProvider,
    OffRamp,
    OnRamp,
    ProviderTransfer,
    SimulatedProvider,
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
    "SimulatedProvider",
    "VirtualAccount",
]
