"""The virtual account (USD in, USDB out, through the provider) and the virtual wallet
(its USDC and USDT swept into c0), one of each per organization."""

from .models import VirtualAccount, VirtualWallet
from .operations import VirtualAccountGroup, VirtualWalletGroup

__all__ = ["VirtualAccount", "VirtualAccountGroup", "VirtualWallet", "VirtualWalletGroup"]
