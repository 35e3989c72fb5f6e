"""Pluggable backends: storage, chain, fiat and custody, one abstract base per group.

Each group is a subpackage (`treasury.backends.storage`, …) exporting its interface."""

__all__: list[str] = []
