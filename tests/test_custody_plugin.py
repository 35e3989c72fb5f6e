"""A third party's custody plugin, written only against the documented `Custody` interface
(docs/writing-backends.md): it passes the conformance suite, and a treasury opened with it
creates wallets over HTTP and completes a deposit transfer on the devnet, its keys never
touching the treasury's own `custody_keys` table."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any, Self

import httpx
import pytest
from eth_account import Account

from treasury import Treasury
from treasury.backends.custody import Custody, CustodyContext, CustodyKey
from treasury.errors import NotFound
from treasury.evm.abi import BALANCE_OF
from treasury.http import create_app
from treasury.testing.custody import CustodySuite
from treasury.testing.server import serve

from .conftest import MASTER_KEY, make_tenant
from .helpers import idem, swap

CHAIN = 31337


class MemoryCustody(Custody):
    """``memory://``: keys in a dict under refs of its own (not addresses), as a remote
    signer would keep them; it ignores the treasury's storage entirely."""

    def __init__(self) -> None:
        self._keys: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.signed = 0

    @classmethod
    def from_url(cls, url: str) -> Self:
        return cls()

    def bind(self, context: CustodyContext) -> None:
        pass  # nothing of the treasury's is needed

    def create_key(self) -> CustodyKey:
        account = Account.create()
        ref = f"mem-{uuid.uuid4().hex}"
        with self._lock:
            self._keys[ref] = account
        return CustodyKey(ref=ref, address=account.address.lower())

    def sign_transaction(self, ref: str, transaction: dict[str, Any]) -> bytes:
        with self._lock:
            account = self._keys.get(ref)
            if account is None:
                raise NotFound("Custody key not found")
            self.signed += 1
        return bytes(account.sign_transaction(transaction).raw_transaction)


class TestMemoryCustody(CustodySuite):
    @pytest.fixture
    def custody(self, context: CustodyContext) -> Iterator[MemoryCustody]:
        custody = MemoryCustody.from_url("memory://")
        custody.bind(context)
        yield custody


def balance(t: Treasury, symbol: str, owner: str) -> int:
    chain = t.chain(CHAIN)
    return int(BALANCE_OF.decode(chain.call(chain.addresses[symbol], BALANCE_OF.encode(owner)))[0])


def test_a_plugin_custody_creates_wallets_over_http_and_signs_a_deposit(storage_url):
    custody = MemoryCustody.from_url("memory://")
    t = Treasury.open(storage_url, master_key=MASTER_KEY, custody=custody)
    tenant = make_tenant(t)
    with (
        serve(create_app(t)) as url,
        httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}, timeout=60) as api,
    ):
        made = [api.post("/v1/wallets", json={"label": f"W{i}"}, headers=idem()) for i in (1, 2)]
        assert [r.status_code for r in made] == [201, 201], [r.text for r in made]
        one, two = (r.json() for r in made)
        assert (one["id"], two["id"]) == (1, 2)  # numbered per organization as ever
        assert one["address"] in {key.address.lower() for key in custody._keys.values()}
        with t.storage.read() as tx:  # local custody's table is not where these keys are
            assert tx.one("SELECT COUNT(*) AS n FROM custody_keys", ())["n"] == 0

        owner = one["address"]
        t.chain(CHAIN).faucet(owner, "ETH", "1")
        t.chain(CHAIN).faucet(owner, "USDC", "100")
        r = api.post("/v1/transfers", json=swap("deposit", owner, owner, "40"), headers=idem())
        assert r.status_code == 201, r.text
        transfer = r.json()
        for _ in range(5):
            if transfer["status"] in ("completed", "failed"):
                break
            summary = t.run_once()
            assert not summary.errors, summary.errors
            transfer = api.get(f"/v1/transfers/{transfer['id']}").json()
        assert transfer["status"] == "completed", transfer
    assert custody.signed >= 2  # the approval and the deposit, signed by the plugin
    assert balance(t, "USDC", owner) == 60 * 10**6
    assert balance(t, "c0", owner) == 40 * 10 ** t.decimals(31337, "c0")
    t.close()
