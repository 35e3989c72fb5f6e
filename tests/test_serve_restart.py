"""`treasury serve` stopped and started again on the same store keeps the organization
whole: the devnet's chain (balances, contracts, nonces, receipts) and the sandbox
provider's customers, bank accounts, virtual account and open transfers. Real processes:
SIGTERM, and kill -9 in the middle of an on-ramp."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import MASTER_KEY, cli_storage, on_postgres
from .helpers import BANK_ACCOUNT, offramp, onramp
from .processes import clean_env, serving

ENV = {"TREASURY_MASTER_KEY": MASTER_KEY}
CHAIN = 31337


@pytest.fixture
def fresh(tmp_path: Path, storage_url: str) -> tuple[Path, str]:
    """A folder where `treasury init` ran; the API key it printed. On PostgreSQL the
    devnet stays in memory unless given a file: the folder's settings give it one."""
    cli_storage(tmp_path, storage_url)
    if on_postgres():
        with (tmp_path / "treasury.toml").open("a") as settings:
            settings.write(f'\n[chains]\n{CHAIN} = "devnet:///treasury.chain"\n')
    init = subprocess.run(
        [sys.executable, "-m", "treasury.cli", "init", "--json"],
        cwd=tmp_path,
        env=clean_env(ENV),
        capture_output=True,
        text=True,
        check=True,
    )
    return tmp_path, json.loads(init.stdout)["apiKey"]["secret"]


def client(base: str, secret: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"x-api-key": secret}, timeout=60)


def post(api: httpx.Client, path: str, body: dict[str, Any], key: str) -> dict[str, Any]:
    made = api.post(path, json=body, headers={"Idempotency-Key": key})
    assert made.status_code in (200, 201), made.text
    answer: dict[str, Any] = made.json()
    return answer


def holdings(api: httpx.Client, address: str) -> dict[str, str]:
    """The wallet's raw token balances by symbol."""
    answer = api.get(f"/{CHAIN}/balances/{address}")
    assert answer.status_code == 200, answer.text
    found = {b["symbol"]: b["raw"] for b in answer.json()["data"]}
    return found


def state(api: httpx.Client) -> dict[str, Any]:
    """What a user checks after a restart: bank accounts and the virtual account."""
    banks = api.get("/bank-accounts")
    virtual = api.get("/virtual-account")
    assert banks.status_code == 200, banks.text
    assert virtual.status_code == 200, virtual.text
    return {"bank_accounts": banks.json(), "virtual_account": virtual.json()}


def completes(api: httpx.Client, transfer_id: str, within: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while (found := api.get(f"/transfers/{transfer_id}").json())["status"] != "completed":
        assert found["status"] in ("pending", "submitted"), found
        assert time.monotonic() < deadline, found
        time.sleep(0.2)
    return found


def organization(api: httpx.Client) -> tuple[dict[str, Any], str]:
    """A wallet funded with USDC and ETH (its gas: off-ramps after the restart need it)
    by the faucet, a bank account, the virtual account."""
    wallet = post(api, "/wallets", {"label": "Ops"}, "wallet")
    for token, amount in (("USDC", "100"), ("ETH", "1")):
        faucet = {"address": wallet["address"], "token": token, "amount": amount}
        assert api.post(f"/test-helpers/{CHAIN}/faucet", json=faucet).status_code == 200
    bank = post(api, "/bank-accounts", BANK_ACCOUNT, "bank")
    assert api.get("/virtual-account").status_code == 200
    return wallet, bank["providerExternalAccountId"]


def test_sigterm_and_restart_keep_everything_and_open_transfers_finish(fresh):
    cwd, secret = fresh
    with serving(cwd, "--no-worker", env=ENV) as first, client(first.base, secret) as api:
        wallet, bank = organization(api)
        opened = post(api, "/transfers", onramp(bank, wallet["address"], "25"), "onramp-1")
        assert opened["status"] == "pending"
        before, kept = holdings(api, wallet["address"]), state(api)
        assert before["USDC"] == "100000000"
    # serving() ends with SIGTERM
    assert first.process.returncode is not None

    with serving(cwd, "--interval", "0.3", env=ENV) as second, client(second.base, secret) as api:
        # the chain was kept: what the wallet held, and the open on-ramp's 25 USDC once
        # it lands (the new server's worker may have finished it before this first read)
        now = holdings(api, wallet["address"])
        assert now["USDC"] in (before["USDC"], str(int(before["USDC"]) + 25 * 10**6)), now
        assert {**now, "USDC": before["USDC"]} == before
        assert state(api) == kept  # bank account and virtual account, as they were
        completes(api, opened["id"])  # the open on-ramp finishes
        again = post(api, "/transfers", onramp(bank, wallet["address"], "5"), "onramp-2")
        completes(api, again["id"])
        out = post(api, "/transfers", offramp(wallet["address"], bank, "30"), "offramp-1")
        completes(api, out["id"])
        after = holdings(api, wallet["address"])
        assert after["USDC"] == str((100 + 25 + 5 - 30) * 10**6)  # each paid once


def test_kill_9_in_the_middle_of_an_onramp_loses_nothing(fresh):
    cwd, secret = fresh
    with serving(cwd, "--interval", "0.2", env=ENV) as first, client(first.base, secret) as api:
        wallet, bank = organization(api)
        kept = state(api)
        opened = post(api, "/transfers", onramp(bank, wallet["address"], "40"), "onramp-1")
        deadline = time.monotonic() + 60
        while api.get(f"/transfers/{opened['id']}").json()["status"] == "pending":
            assert time.monotonic() < deadline, first.output()
            time.sleep(0.05)
        first.process.kill()  # SIGKILL: paid out on the chain, not yet completed
        first.process.wait()
        assert first.process.returncode == -9

    with serving(cwd, "--interval", "0.2", env=ENV) as second, client(second.base, secret) as api:
        assert state(api) == kept
        completes(api, opened["id"])
        assert holdings(api, wallet["address"])["USDC"] == str(140 * 10**6)  # paid once
        again = post(api, "/transfers", onramp(bank, wallet["address"], "2"), "onramp-2")
        out = post(api, "/transfers", offramp(wallet["address"], bank, "42"), "offramp-1")
        completes(api, again["id"])
        completes(api, out["id"])
        assert holdings(api, wallet["address"])["USDC"] == str(100 * 10**6)
