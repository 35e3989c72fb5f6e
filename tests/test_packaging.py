"""The public surface: `import treasury` without Flask, fast, and a pinned `__all__`."""

from __future__ import annotations

import subprocess
import sys

import treasury

BLOCK_FLASK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'flask', 'werkzeug', 'waitress'}:
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
"""


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_import_and_use_without_flask():
    out = run(
        BLOCK_FLASK
        + "import treasury\n"
        + "t = treasury.Treasury.open('sqlite:///:memory:')\n"
        + "org = t.admin.create_organization('Acme')\n"
        + "print(t.for_organization(org.id).wallets.create(label='x').label)\n"
        + "try:\n    import treasury.http\nexcept ImportError as e:\n    print('http needs flask')\n"
    )
    assert out.splitlines() == ["x", "http needs flask"]


def test_import_treasury_loads_no_heavy_dependency():
    out = run(
        "import sys, treasury\n"
        "print(sorted(m for m in ('web3', 'eth_account', 'flask', 'eth_tester') if m in sys.modules))"
    )
    assert out == "[]"


def test_public_names_are_pinned():
    assert sorted(treasury.__all__) == [
        "AuthenticationError",
        "Conflict",
        "IdempotencyInFlight",
        "IdempotencyKeyReused",
        "NotFound",
        "OrganizationHandle",
        "RateLimited",
        "RunSummary",
        "Settings",
        "Treasury",
        "TreasuryError",
        "UpstreamError",
        "ValidationError",
    ]
    for name in treasury.__all__:
        assert getattr(treasury, name) is not None
