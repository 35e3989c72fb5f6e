"""The optional HTTP front end (the ``http`` extra of ``treasury-api``): Flask, at /v1."""

from ._blueprint import create_app, create_blueprint

__all__ = ["create_app", "create_blueprint"]
