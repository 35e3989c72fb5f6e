"""The Solidity sources of the contracts the devnet and anvil deploy (data files)."""

__all__: list[str] = []
