"""The statement conformance suite: the library's own statements on any storage.

`treasury.testing.storage.StorageSuite` checks a backend's primitives; `StatementSuite`
runs the library's real code paths on it (idempotency claims, guarded updates, keyset
pages, ``LIKE`` patterns, per-organization numbers), where a dialect's locking, paramstyle
or row-value support shows. Subclass it and provide a ``storage`` fixture exactly as for
`StorageSuite` (a fresh store, closed afterwards; a second ``close()`` must be harmless,
since the treasury the suite opens on it closes it too)::

    import pytest
    from treasury.testing.statements import StatementSuite

    class TestMyStatements(StatementSuite):
        @pytest.fixture
        def storage(self, tmp_path):
            store = MyStorage.from_url(...)
            yield store
            store.close()

Treasuries are opened without chains (``chains={}``), so no EVM runs.
"""

from __future__ import annotations

import functools
import json
import secrets
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from treasury import IdempotencyInFlight, OrganizationHandle, Treasury
from treasury._infra.schema import migrate
from treasury._records import transactions, wallets
from treasury._records.events import emit
from treasury._records.transactions import RecordTransaction
from treasury.backends.chain.base import Receipt
from treasury.backends.fiat.base import ExternalAccount, FiatProvider
from treasury.backends.fiat.sandbox import SandboxFiat
from treasury.backends.storage.base import Storage, format_paramstyle
from treasury.bank_accounts.models import BankAccount
from treasury.recipients.models import Recipient
from treasury.test_helpers.samples import BANK_ACCOUNT
from treasury.testing._pages import PageTests
from treasury.testing._storage_base import NOW
from treasury.testing._support import THREAD_TIMEOUT, run_threads
from treasury.transactions import store as transaction_store
from treasury.transactions.indexer import receipt_json
from treasury.transactions.models import shown
from treasury.webhooks.deliveries import lease_due

MASTER_KEY = "0" * 64
CHAIN_ID = 31337
HOOK_URL = "http://127.0.0.1:9/hook"
EVENTS = ["transaction.confirmed"]


def new_address() -> str:
    return "0x" + secrets.token_hex(20)


def open_treasury(storage: Storage, fiat: FiatProvider | None = None) -> Treasury:
    """A treasury on `storage` as is: no chains, a fixed master key, loopback webhooks."""
    return Treasury.open(
        storage, chains={}, fiat=fiat, master_key=MASTER_KEY, allow_private_webhook_urls=True
    )


def new_organization(t: Treasury, name: str = "Acme") -> OrganizationHandle:
    return t.for_organization(t.admin.create_organization(name).id, user_id="user_1")


class BlockingFiat(SandboxFiat):
    """The sandbox provider, whose registrations wait until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()
        self.calls, self._calls_lock = 0, threading.Lock()

    def register_external_account(
        self, customer_id: str, account: ExternalAccount, *, idempotency_key: str
    ) -> str:
        with self._calls_lock:
            self.calls += 1
        self.entered.set()
        assert self.release.wait(THREAD_TIMEOUT), "never released"
        return super().register_external_account(
            customer_id, account, idempotency_key=idempotency_key
        )


class StatementSuite(PageTests):
    """Conformance tests of the library's statements; subclasses provide ``storage``."""

    # -- fixtures ---------------------------------------------------------------------

    @pytest.fixture
    def treasury(self, storage: Storage) -> Iterator[Treasury]:
        t = open_treasury(storage)
        yield t
        t.close()

    @pytest.fixture
    def org(self, treasury: Treasury) -> OrganizationHandle:
        return new_organization(treasury)

    # -- idempotency --------------------------------------------------------------------

    def test_idempotency_race_creates_once(self, org: OrganizationHandle) -> None:
        address, lock = new_address(), threading.Lock()
        results: list[Recipient] = []

        def create() -> None:
            try:
                found = org.recipients.create(address=address, label="x", idempotency_key="k")
            except IdempotencyInFlight:
                return
            with lock:
                results.append(found)

        run_threads([create] * 16)
        assert results, "every call was in flight"
        assert [r.replayed for r in results].count(False) == 1  # one ran, the rest replayed
        original = next(r for r in results if not r.replayed)
        assert all(r == original for r in results)
        assert [r.address for r in org.recipients.list().data] == [address]
        # numbers only grow: a backend that takes them ahead of the transaction
        # (`Transaction.ahead`, PostgreSQL) skips those the losers' rolled-back attempts
        # took, one that takes them inside it (SQLite) gives the next one
        assert org.recipients.create(address=new_address(), label="y").id > original.id

    def test_two_phase_claim_is_in_flight_until_recorded(self, storage: Storage) -> None:
        provider = BlockingFiat()
        t = open_treasury(storage, fiat=provider)
        org = new_organization(t)

        def create() -> BankAccount:
            return org.bank_accounts.create(BANK_ACCOUNT, idempotency_key="k")

        with ThreadPoolExecutor(1) as pool:
            try:
                first = pool.submit(create)
                assert provider.entered.wait(THREAD_TIMEOUT), "the provider was never called"
                with pytest.raises(IdempotencyInFlight):
                    create()
                assert org.bank_accounts.list().data == []  # not registered yet
            finally:
                provider.release.set()
            original = first.result(THREAD_TIMEOUT)
        assert not original.replayed and original.id == 1  # the refused claim took no number
        again = create()
        assert again.replayed and again == original
        assert again.provider_external_account_id == original.provider_external_account_id
        listed = org.bank_accounts.list().data
        assert [row.id for row in listed] == [original.provider_external_account_id]
        assert provider.calls == 1 and len(provider.accounts) == 1

    # -- guarded updates ----------------------------------------------------------------

    def test_indexer_resolves_a_transaction_once(
        self, treasury: Treasury, org: OrganizationHandle
    ) -> None:
        storage, address, tx_hash = treasury.storage, new_address(), "0x" + secrets.token_hex(32)
        wallet = org.wallets.track(address=address, label="Cold").wallet
        request = RecordTransaction.model_validate(
            {
                "hash": tx_hash,
                "type": "deposit",
                "from": new_address(),
                "contract": new_address(),
                "token": new_address(),
                "amount": "1000000",
                "walletId": wallet.id,
            }
        )
        with storage.transaction() as tx:
            row = wallets.by_number(tx, org.id, wallet.id)
            assert row is not None
            transactions.insert(tx, org.id, CHAIN_ID, request, row, NOW)
        moved: dict[int, list[dict[str, Any]]] = {}

        def resolve(i: int) -> None:
            now = f"2024-01-02T03:05:{i:02d}.000000Z"
            receipt = Receipt(
                transaction_hash=tx_hash,
                transaction_index=0,
                block_hash="0x" + "ab" * 32,
                block_number=100 + i,  # tells the writers apart
                sender=address,
                to=None,
                contract_address=None,
                status=1,
                type=2,
            )
            text = json.dumps(receipt_json(CHAIN_ID, receipt, now))
            with storage.transaction() as tx:
                moved[i] = transaction_store.resolve(tx, CHAIN_ID, tx_hash, "confirmed", text, now)

        run_threads([functools.partial(resolve, i) for i in range(8)])
        winners = [i for i, rows in moved.items() if rows]
        assert len(moved) == 8 and len(winners) == 1, moved
        [won] = moved[winners[0]]
        assert (won["hash"], won["status"]) == (tx_hash, "confirmed")
        assert won["wallet_address"] == address
        with storage.read() as tx:
            stored = tx.query("SELECT updated_at FROM transactions WHERE hash = ?", (tx_hash,))
            row = transactions.by_hash(tx, org.id, CHAIN_ID, tx_hash)
        assert stored == [{"updated_at": won["updated_at"]}]
        assert row is not None
        seen = shown(row)  # the winner's receipt, not a later writer's
        assert seen.status == "confirmed" and seen.receipt is not None
        assert seen.receipt.block_number == 100 + winners[0]
        assert seen.wallet_id == wallet.id and seen.amount == "1000000"

    def test_concurrent_claims_take_different_rows(
        self, treasury: Treasury, org: OrganizationHandle
    ) -> None:
        """A claimer whose rows are still locked by an open transaction does not stop
        another: the second takes the next rows at once (SKIP LOCKED where writers run
        concurrently; after the first commits where they run one at a time)."""
        storage = treasury.storage
        org.webhooks.create(url=HOOK_URL, events=EVENTS)
        with storage.transaction() as tx:
            for _ in range(12):
                emit(tx, org_id=org.id, event_type=EVENTS[0], wallet_address=None, data={}, now=NOW)
        until = "2999-01-01T00:00:00.000000Z"
        claimed: dict[str, list[dict[str, Any]]] = {}
        first_done, release = threading.Event(), threading.Event()

        def first() -> None:
            with storage.transaction() as tx:
                claimed["first"] = lease_due(tx, NOW, NOW, until, 5)
                first_done.set()
                assert release.wait(THREAD_TIMEOUT), "never released"

        def second() -> None:
            assert first_done.wait(THREAD_TIMEOUT)
            with storage.transaction() as tx:
                claimed["second"] = lease_due(tx, NOW, NOW, until, 5)

        with storage.read() as tx:
            concurrent_writers = bool(tx.skip_locked)
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(first), pool.submit(second)]
            if concurrent_writers:  # the second must not wait for the first to commit
                futures[1].result(THREAD_TIMEOUT)
            release.set()
            for future in futures:
                future.result(THREAD_TIMEOUT)
        firsts = {row["id"] for row in claimed["first"]}
        seconds = {row["id"] for row in claimed["second"]}
        assert len(firsts) == len(seconds) == 5 and not firsts & seconds, (firsts, seconds)
        with storage.transaction() as tx:  # and the two remaining rows are still free
            assert len(lease_due(tx, NOW, NOW, until, 5)) == 2

    # -- LIKE and paramstyles -----------------------------------------------------------

    def test_default_wallet_label_with_a_literal_percent(self, org: OrganizationHandle) -> None:
        for label in ("Wallet 1", "Wallet 3", "Wallets", "Wallet%x", "wallet 2", "My Wallet 2"):
            org.wallets.create(label=label)
        assert org.wallets.create().label == "Wallet 2"
        assert org.wallets.create().label == "Wallet 4"
        labels = [w.label for w in org.wallets.list().data]
        assert labels.count("Wallet 2") == 1 and "Wallet%x" in labels

    def test_format_paramstyle(self) -> None:
        cases = {
            "SELECT a FROM t WHERE b = ?": "SELECT a FROM t WHERE b = %s",
            "SELECT ? || 'Wallet %'": "SELECT %s || 'Wallet %%'",
            "WHERE label LIKE 'a?%' AND n % 2 = ?": "WHERE label LIKE 'a?%%' AND n %% 2 = %s",
            "SELECT 'it''s ?', ?, '?'": "SELECT 'it''s ?', %s, '?'",
            "SELECT 1": "SELECT 1",
        }
        for qmark, formatted in cases.items():
            assert format_paramstyle(qmark) == formatted

    # -- per-organization numbers -------------------------------------------------------

    def test_numbers_per_organization(self, treasury: Treasury) -> None:
        orgs = [new_organization(treasury, name) for name in ("Acme", "Beta")]
        ids: dict[tuple[str, str], list[int]] = {}
        lock = threading.Lock()

        def note(org: OrganizationHandle, kind: str, number: int) -> None:
            with lock:
                ids.setdefault((org.id, kind), []).append(number)

        def work(org: OrganizationHandle, i: int) -> None:
            note(org, "recipients", org.recipients.create(address=new_address(), label="r").id)
            note(org, "wallets", org.wallets.create(label=f"w{i}").id)
            note(org, "webhooks", org.webhooks.create(url=HOOK_URL, events=EVENTS).id)

        run_threads([functools.partial(work, org, i) for i in range(6) for org in orgs])
        for org in orgs:
            for kind in ("recipients", "wallets", "webhooks"):
                assert sorted(ids[org.id, kind]) == [1, 2, 3, 4, 5, 6], (org.id, kind)
            assert sorted(r.id for r in org.recipients.list().data) == [1, 2, 3, 4, 5, 6]
            assert sorted(w.id for w in org.wallets.list().data) == [1, 2, 3, 4, 5, 6]
            assert sorted(h.id for h in org.webhooks.list().data) == [1, 2, 3, 4, 5, 6]

    def test_numbers_are_never_reused(self, org: OrganizationHandle) -> None:
        created = [org.wallets.create(label=f"w{i}") for i in range(3)]
        assert [w.id for w in created] == [1, 2, 3]
        org.wallets.delete(created[2].address)
        org.wallets.delete(created[0].address)
        assert org.wallets.create(label="again").id == 4
        back = org.wallets.track(address=created[2].address, label="back")  # a deleted address
        assert back.wallet.id == 5
        assert sorted(w.id for w in org.wallets.list().data) == [2, 4, 5]
        # each resource counts on its own
        assert org.recipients.create(address=new_address(), label="r").id == 1

    def test_migrated_schema_is_current(self, storage: Storage) -> None:
        """Opening a treasury on an already migrated store works and changes nothing."""
        version = migrate(storage, now=NOW)
        with storage.read() as tx:
            before = tx.query("SELECT version, applied_at FROM schema_migrations ORDER BY version")
        t = open_treasury(storage)
        org = new_organization(t)
        assert org.recipients.create(address=new_address(), label="r").id == 1
        with storage.read() as tx:
            after = tx.query("SELECT version, applied_at FROM schema_migrations ORDER BY version")
        assert after == before and before[-1]["version"] == version
        t.close()
