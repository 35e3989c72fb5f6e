"""Reading the database file as bytes finds none of the secrets the tests created."""

from __future__ import annotations

import copy
import os
import stat

from treasury import Treasury

from .conftest import make_tenant
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
