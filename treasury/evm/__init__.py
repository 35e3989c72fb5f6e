"""EVM helpers below the domains: ABI encoding and the contract functions the library
calls (`abi`), Multicall3 batching (`multicall`), signing with nonces (`signing`).

eth-abi, eth-utils and eth-account are imported inside functions: `import treasury`
stays light.

Internal to the library: no names are exported here.
"""

__all__: list[str] = []
