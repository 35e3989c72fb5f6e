"""Fixtures: a treasury on a real SQLite file, organizations with keys, a live HTTP server."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import eth_account  # noqa: F401  (its import raises the recursion limit; do it before hypothesis runs)
import httpx
import pytest

from treasury import Organization, Treasury

MASTER_KEY = "0" * 64  # hex; tests pass it explicitly so no key file is written


@pytest.fixture(autouse=True)
def _quiet_werkzeug() -> None:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "treasury.db"


@pytest.fixture
def treasury(db_path: Path) -> Iterator[Treasury]:
    t = Treasury.open(
        f"sqlite:///{db_path}", master_key=MASTER_KEY, allow_private_webhook_urls=True
    )
    yield t
    t.close()


@dataclass
class Tenant:
    """An organization with one API key: its handle and its secret."""

    org: Organization
    secret: str
    key_id: str


def make_tenant(t: Treasury, name: str = "Acme", user_id: str = "user_1") -> Tenant:
    org = t.admin.create_organization(name)
    key = t.admin.create_api_key(org.id, user_id=user_id)
    return Tenant(t.for_api_key(key.secret), key.secret, key.id)


@pytest.fixture
def tenant(treasury: Treasury) -> Tenant:
    return make_tenant(treasury)


@pytest.fixture
def base_url(treasury: Treasury) -> Iterator[str]:
    from treasury.http import create_app
    from treasury.testing.server import serve

    with serve(create_app(treasury)) as url:
        yield url


@pytest.fixture
def client(base_url: str, tenant: Tenant) -> Iterator[httpx.Client]:
    """An httpx client on the live server, authenticated as `tenant`."""
    with httpx.Client(base_url=base_url, headers={"x-api-key": tenant.secret}) as c:
        yield c


def require_anvil() -> str:
    """The anvil binary; skip without it, except under CI (which installs it)."""
    from treasury.devnet_node import find_anvil

    binary = find_anvil()
    if binary is None:
        reason = "anvil not found (run `npm ci` or set TREASURY_ANVIL)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set")
        pytest.skip(reason)
    return binary


@pytest.fixture(scope="module")
def anvil_config() -> Iterator[dict[str, Any]]:
    """A real anvil node with our contracts: the chain configuration `{url, addresses}`."""
    from treasury.devnet_node import deploy_contracts, start_anvil

    require_anvil()
    with start_anvil() as node:
        yield deploy_contracts(node.url)
