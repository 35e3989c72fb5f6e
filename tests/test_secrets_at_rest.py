"""Reading the database file as bytes finds none of the secrets the tests created."""

from __future__ import annotations

import copy
import os
import stat

import pytest

from treasury import Treasury

from .conftest import make_tenant, sqlite_only
from .helpers import BANK_ACCOUNT


def all_bytes(db_path) -> bytes:
    """The database and its WAL, as an attacker with a copy of the disk would read them."""
    data = b""
    for suffix in ("", "-wal", "-shm"):
        path = f"{db_path}{suffix}"
        if os.path.exists(path):
            with open(path, "rb") as f:
                data += f.read()
    return data


@sqlite_only  # reads the file
def test_no_account_number_private_key_or_api_secret_in_the_file(treasury, tenant, db_path):
    account_numbers = ["987654321012", "55550000111"]
    for number in account_numbers:
        body = copy.deepcopy(BANK_ACCOUNT)
        body["account"]["account_number"] = number
        tenant.org.bank_accounts.create(body)
    wallet = tenant.org.wallets.create(label="Hot")
    hook = tenant.org.webhooks.create(url="http://127.0.0.1:1/h", events=["transaction.failed"])
    other = treasury.admin.create_api_key(tenant.org.id, user_id="user_2")

    from eth_account import Account

    with treasury.storage.read() as tx:
        sealed = tx.one("SELECT private_key FROM custody_keys WHERE address = ?", (wallet.address,))
    private_key = treasury._runtime.secrets.decrypt("custody-private-key", sealed["private_key"])
    assert Account.from_key(private_key).address.lower() == wallet.address  # it is the real key

    data = all_bytes(db_path)
    assert wallet.address.encode() in data  # the file is readable: addresses are there
    for number in account_numbers:
        assert number.encode() not in data
    assert b"021000021" not in data  # routing numbers are encrypted too
    for form in (private_key, private_key.removeprefix("0x")):
        assert form.encode() not in data
        assert bytes.fromhex(form.removeprefix("0x")) not in data
    for secret in (tenant.secret, other.secret, hook.secret):
        assert secret.encode() not in data
    assert hook.secret.removeprefix("whsec_").encode() not in data


@sqlite_only  # the key file beside the database
def test_zero_config_master_key_file_is_private_and_reused(tmp_path, monkeypatch):
    monkeypatch.delenv("TREASURY_MASTER_KEY", raising=False)
    db = tmp_path / "zero.db"
    t = Treasury.open(f"sqlite:///{db}")
    tenant = make_tenant(t)
    account = tenant.org.bank_accounts.create(BANK_ACCOUNT)
    t.close()
    key_file = tmp_path / "zero.db.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    again = Treasury.open(f"sqlite:///{db}")  # decrypts with the same key file
    rows = again.for_api_key(tenant.secret).bank_accounts.list().data
    assert [r.routing_number for r in rows] == [account.routing_number]
    again.close()


def test_another_master_key_is_a_clear_error_not_a_crypto_exception(storage_url, treasury, tenant):
    from treasury import TreasuryError

    tenant.org.bank_accounts.create(BANK_ACCOUNT)
    wallet = tenant.org.wallets.create(label="Hot")
    treasury.close()
    other = Treasury.open(storage_url, master_key="1" * 64)
    org = other.for_api_key(tenant.secret)
    with pytest.raises(TreasuryError, match="master key is not the one"):
        org.bank_accounts.list()
    other.chain(31337).faucet(wallet.address, "ETH", "1")  # it can pay for gas
    with pytest.raises(TreasuryError, match="master key is not the one"):
        org.wallets.send_transaction(31337, wallet.address, to=wallet.address)
    other.close()


@sqlite_only  # reads the file
def test_replayed_outcomes_are_sealed_too(treasury, tenant, db_path):
    """A replay body may hold a secret shown once (a webhook's): outcomes are encrypted."""
    hook = tenant.org.webhooks.create(
        url="http://127.0.0.1:1/h", events=["transaction.failed"], idempotency_key="hook"
    )
    replay = tenant.org.webhooks.create(
        url="http://127.0.0.1:1/h", events=["transaction.failed"], idempotency_key="hook"
    )
    assert replay.replayed and replay.secret == hook.secret
    tenant.org.bank_accounts.create(BANK_ACCOUNT, idempotency_key="bank")
    data = all_bytes(db_path)
    assert hook.secret.removeprefix("whsec_").encode() not in data
    assert b"021000021" not in data


@sqlite_only  # reads the file
def test_no_deposit_account_number_in_the_file(treasury, tenant, db_path):
    """Deposit instructions (an on-ramp's, the virtual account's) hold the provider's
    account numbers: sealed in the transfer row, the stored idempotent outcome, the
    virtual account row and the transfer events' payloads."""
    from .helpers import address, events, onramp

    org = tenant.org
    org.webhooks.create(url="http://127.0.0.1:1/h", events=["transfer.created"])
    bank = org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
    body = onramp(bank, address(), "5")
    made = org.transfers.create(body, idempotency_key="deposit-1")
    virtual = org.virtual_account.get()
    replay = org.transfers.create(body, idempotency_key="deposit-1")
    assert replay.replayed and replay.deposit_instructions == made.deposit_instructions
    assert made.deposit_instructions is not None
    numbers = [made.deposit_instructions.account_number, virtual.deposit_account_number]
    ((_, announced),) = events(treasury, "transfer.")  # opened, it carries them
    assert announced["depositInstructions"]["accountNumber"] == numbers[0]
    data = all_bytes(db_path)
    assert made.id.encode() in data  # the file is readable: the transfer is there
    for number in numbers:
        assert len(number) >= 6 and number.encode() not in data


@sqlite_only  # the key file beside the database
def test_a_store_whose_key_file_is_missing_is_refused_naming_it(tmp_path, monkeypatch):
    """Never a new master key for data encrypted with the lost one: the error names the
    file, and nothing is written (no key file, the database unchanged)."""
    monkeypatch.delenv("TREASURY_MASTER_KEY", raising=False)
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    t = Treasury.open(url)
    org = t.admin.create_organization("Acme")
    t.for_organization(org.id).wallets.create(label="Ops")  # a custody key, encrypted
    t.close()
    key_file = tmp_path / "kept.db.key"
    key_file.unlink()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.suffix == ".db"}
    from treasury.errors import TreasuryError

    with pytest.raises(TreasuryError, match=r"kept\.db\.key") as refused:
        Treasury.open(url)
    assert "missing" in str(refused.value)
    assert not key_file.exists()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.suffix == ".db"} == before
    # and through the CLI: exit 1 naming the file
    from click.testing import CliRunner

    from treasury.cli import main

    result = CliRunner().invoke(main, ["--storage", url, "orgs", "list"])
    assert result.exit_code == 1 and "kept.db.key" in result.stderr, result.output
    assert not key_file.exists()
