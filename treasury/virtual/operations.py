"""The virtual account and the virtual wallet: one each per organization, provisioned on
first read and the same afterwards."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timedelta

from .._infra.clock import to_text
from .._infra.group import Group
from .._records.customers import provider_customer
from ..backends.fiat.base import VirtualAccount as ProviderAccount
from ..backends.storage.base import Row, Transaction
from .models import VirtualAccount, VirtualWallet

#: How long a read of the provider wallet's USDB balance is reused.
BALANCE_TTL = timedelta(seconds=10)
LABEL = "Virtual account"
#: The purpose under which the deposit instructions (an account number) are sealed.
DEPOSIT = "virtual-account-deposit"


class VirtualAccountGroup(Group):
    name = "virtual_account"

    def get(self) -> VirtualAccount:
        """The organization's virtual account, provisioned with the provider on first call
        (concurrent first calls ask the provider with one idempotency key)."""
        runtime, org_id = self._scope.runtime, self._scope.org_id
        row = self._row()
        if row is None:
            customer = provider_customer(runtime, org_id)
            account = runtime.fiat.create_virtual_account(
                customer, idempotency_key=f"virtual-account-{org_id}"
            )
            self._insert(account)
            row = self._row()
            assert row is not None
        return self._shown(self._fresh_balance(row))

    def _row(self) -> Row | None:
        with self._scope.runtime.storage.read() as tx:
            return tx.one("SELECT * FROM virtual_accounts WHERE org_id = ?", (self._scope.org_id,))

    def _insert(self, account: ProviderAccount) -> None:
        scope, now = self._scope, self._scope.runtime.now_text()
        with scope.runtime.storage.transaction() as tx:
            tx.execute(
                "INSERT INTO virtual_accounts (org_id, user_id, provider_virtual_account_id,"
                " provider_customer_id, provider_wallet_id, developer_fee_percent, deposit,"
                " label, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (org_id) DO NOTHING",
                (
                    scope.org_id,
                    scope.user_id,
                    account.id,
                    account.customer_id,
                    account.wallet_id,
                    account.developer_fee_percent,
                    scope.runtime.secrets.seal(DEPOSIT, json.dumps(asdict(account.deposit))),
                    LABEL,
                    now,
                    now,
                ),
            )

    def _fresh_balance(self, row: Row) -> Row:
        """The row with a USDB balance read from the provider at most `BALANCE_TTL` ago
        (kept in the row, so every process shares the last read)."""
        runtime = self._scope.runtime
        now = runtime.now()
        read_at = row["balance_read_at"]
        if read_at is not None and datetime.fromisoformat(read_at) + BALANCE_TTL > now:
            return row
        balance = runtime.fiat.wallet_balance(
            row["provider_customer_id"], row["provider_wallet_id"]
        )
        with runtime.storage.transaction() as tx:
            tx.execute(
                "UPDATE virtual_accounts SET usdb_balance = ?, balance_read_at = ? WHERE id = ?",
                (balance, to_text(now), row["id"]),
            )
        return row | {"usdb_balance": balance}

    def _shown(self, row: Row) -> VirtualAccount:
        deposit = json.loads(self._scope.runtime.secrets.unseal(DEPOSIT, row["deposit"]))
        return VirtualAccount(
            id=row["id"],
            organization_id=row["org_id"],
            user_id=row["user_id"],
            provider_virtual_account_id=row["provider_virtual_account_id"],
            provider_customer_id=row["provider_customer_id"],
            provider_wallet_id=row["provider_wallet_id"],
            developer_fee_percent=row["developer_fee_percent"],
            usdb_balance=row["usdb_balance"],
            label=row["label"],
            **{f"deposit_{name}": value for name, value in deposit.items()},  # a BankDeposit
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


class VirtualWalletGroup(Group):
    name = "virtual_wallet"

    def get(self) -> VirtualWallet:
        """The organization's virtual wallet: a custody-managed wallet created on first
        call, whose USDC and USDT the sweep job turns into c0."""
        runtime, org_id = self._scope.runtime, self._scope.org_id
        with runtime.storage.read() as tx:
            row = _wallet(tx, org_id)
        if row is None:
            with runtime.storage.transaction() as tx:
                tx.lock(f"virtual-wallet:{org_id}")
                row = _wallet(tx, org_id)
                if row is None:
                    key, now = runtime.custody.create_key(), runtime.now_text()
                    tx.execute(
                        "INSERT INTO virtual_wallets (org_id, address, custody_ref, created_at,"
                        " updated_at) VALUES (?, ?, ?, ?, ?)",
                        (org_id, key.address, key.ref, now, now),
                    )
                    row = _wallet(tx, org_id)
        assert row is not None
        return VirtualWallet(
            id=row["id"],
            organization_id=row["org_id"],
            address=row["address"],
            custody_wallet_id=row["custody_ref"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


def _wallet(tx: Transaction, org_id: str) -> Row | None:
    return tx.one("SELECT * FROM virtual_wallets WHERE org_id = ?", (org_id,))
