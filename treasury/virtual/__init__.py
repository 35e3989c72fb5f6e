"""The virtual account (USD in, USDB out, through the provider) and the virtual wallet
(its USDC and USDT swept into c0), one of each per organization."""

import typing as _typing

from .._infra.imports import lazy_attributes as _lazy_attributes
from .models import VirtualAccount, VirtualWallet

if _typing.TYPE_CHECKING:
    from .operations import VirtualAccountGroup, VirtualWalletGroup


__all__ = ["VirtualAccount", "VirtualAccountGroup", "VirtualWallet", "VirtualWalletGroup"]

# The operations are imported on first use (a model alone does not load them).
__getattr__ = _lazy_attributes(
    __name__, {"VirtualAccountGroup": ".operations", "VirtualWalletGroup": ".operations"}
)
