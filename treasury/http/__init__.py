"""The optional HTTP front end (``pip install 'treasury[http]'``): Flask, mounted at /v1."""

from ._blueprint import create_app, create_blueprint

__all__ = ["create_app", "create_blueprint"]
