"""Test helpers: a faucet on chains that can mint (the devnet, `treasury devnet`)."""

from .models import Faucet, Funded
from .operations import TestHelpers

__all__ = ["Faucet", "Funded", "TestHelpers"]
