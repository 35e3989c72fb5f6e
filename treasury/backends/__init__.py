"""Pluggable backends: storage, chain, fiat and custody, one abstract base per group."""
