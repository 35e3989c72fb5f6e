"""Shared infrastructure below the domains: it never imports a domain or the core.

runtime (the backends and one organization's scope), storage helpers (`sql`), `schema`
(migrations), `idempotency`, `crypto`, `clock`, `plugins`, `chains` (the chain
registry), `ratelimit`, `validation` and `models` (field types and base classes).
"""
