"""`StorageBasics`: `StorageSuite`'s tests of the interface, migrations, commit and
rollback, savepoints, unique violations, values and rows."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from treasury._infra.schema import MIGRATIONS, migrate
from treasury.backends.storage.base import DuplicateKey, Storage
from treasury.testing._storage_base import (
    LATER,
    LATEST,
    NOW,
    TABLES,
    StorageBase,
    recorded_versions,
)
from treasury.testing._support import THREAD_TIMEOUT, Boom, Interrupt, in_thread, run_threads


class StorageBasics(StorageBase):
    """Migrations, transactions, savepoints, constraints and values."""

    # -- the interface ----------------------------------------------------------------

    def test_types_and_key_file(self, storage: Storage) -> None:
        spellings = {"pk", "blob", "clustered", "sortable_text", "define_sha256_hex"}
        assert spellings <= set(storage.types)
        assert all(isinstance(v, str) for v in storage.types.values())
        # every spelling is a type, but {clustered} (a table option some dialects have
        # none of) and {define_sha256_hex} (empty where each connection defines it)
        optional = {"clustered", "define_sha256_hex"}
        assert all(v for k, v in storage.types.items() if k not in optional)
        assert storage.key_file is None or isinstance(storage.key_file, Path)

    def test_sha256_hex_is_the_sha256_of_the_utf8_text(self, storage: Storage) -> None:
        text = 'a "quoted" \\ Zoë 東京 💸'
        migrate(storage, now=NOW)  # defines it where a migration does
        with storage.transaction() as tx:
            row = tx.one("SELECT sha256_hex(?) AS digest", (text,))
        assert row == {"digest": hashlib.sha256(text.encode()).hexdigest()}

    # -- migrations -------------------------------------------------------------------

    def test_migrate_applies_every_migration_and_records_it(self, storage: Storage) -> None:
        before = recorded_versions(storage)
        assert migrate(storage, now=NOW) == LATEST
        after = recorded_versions(storage)
        assert sorted(after) == [number for number, _, _ in MIGRATIONS]
        for number, description, _ in MIGRATIONS:
            assert after[number]["description"] == description
            expected = before[number]["applied_at"] if number in before else NOW
            assert after[number]["applied_at"] == expected
            assert isinstance(after[number]["version"], int)
        with storage.read() as tx:
            for name in TABLES:  # every table exists and is queryable
                row = tx.one(f"SELECT COUNT(*) AS n FROM {name}")
                assert row is not None and isinstance(row["n"], int)

    def test_migrate_twice_is_a_no_op(self, storage: Storage) -> None:
        assert migrate(storage, now=NOW) == LATEST
        first = recorded_versions(storage)
        assert migrate(storage, now=LATER) == LATEST
        assert recorded_versions(storage) == first

    def test_concurrent_migrations_both_succeed(self, storage: Storage) -> None:
        results: list[int] = []
        run_threads([lambda: results.append(migrate(storage, now=NOW))] * 4)
        assert results == [LATEST] * 4
        versions = recorded_versions(storage)
        assert sorted(versions) == [number for number, _, _ in MIGRATIONS]
        with storage.transaction() as tx:  # the schema works: constraints included
            tx.execute(
                "INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)",
                ("org_1", "Acme", NOW),
            )
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.execute(
                    "INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)",
                    ("org_1", "Again", NOW),
                )
        with storage.read() as tx:
            assert tx.query("SELECT id, name FROM organizations") == [
                {"id": "org_1", "name": "Acme"}
            ]

    # -- commit and rollback ----------------------------------------------------------

    def test_committed_writes_are_visible_everywhere(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            assert self.insert(tx, table, "a") == 1
            assert self.insert(tx, table, "b") == 1
        assert self.keys(storage, table) == ["a", "b"]
        assert in_thread(lambda: self.keys(storage, table)) == ["a", "b"]

    def test_a_transaction_says_whether_it_committed(self, storage: Storage, table: str) -> None:
        with storage.transaction() as outer:
            with storage.transaction() as inner:  # a savepoint: part of the outer one
                self.insert(inner, table, "a")
            assert not inner.committed and not outer.committed
        assert outer.committed and inner.committed
        with pytest.raises(Boom), storage.transaction() as failed:
            self.insert(failed, table, "b")
            raise Boom("abort")
        assert not failed.committed

    def test_exception_rolls_back_everything(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "kept")
        error = Boom("abort")
        with pytest.raises(Boom) as caught, storage.transaction() as tx:
            self.insert(tx, table, "a")
            tx.execute(f"UPDATE {table} SET n = 99 WHERE k = ?", ("kept",))
            self.insert(tx, table, "b")
            raise error
        assert caught.value is error  # propagated unchanged
        assert self.keys(storage, table) == ["kept"]
        with storage.read() as r:
            assert r.one(f"SELECT n FROM {table} WHERE k = ?", ("kept",)) == {"n": 0}

    def test_base_exception_rolls_back_too(self, storage: Storage, table: str) -> None:
        with pytest.raises(Interrupt), storage.transaction() as tx:
            self.insert(tx, table, "a")
            raise Interrupt
        assert self.keys(storage, table) == []
        # the thread is back outside any transaction: the next one really commits
        with storage.transaction() as tx:
            self.insert(tx, table, "b")
        assert in_thread(lambda: self.keys(storage, table)) == ["b"]

    def test_transaction_after_failed_one_commits(self, storage: Storage, table: str) -> None:
        with pytest.raises(Boom), storage.transaction() as tx:
            self.insert(tx, table, "a")
            with storage.transaction() as inner:
                self.insert(inner, table, "b")
            raise Boom
        with storage.transaction() as tx:
            self.insert(tx, table, "c")
        assert in_thread(lambda: self.keys(storage, table)) == ["c"]

    def test_execute_returns_changed_row_count(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            for k in "abc":
                assert self.insert(tx, table, k) == 1
            assert tx.execute(f"UPDATE {table} SET n = n + 1 WHERE k <> ?", ("a",)) == 2
            assert tx.execute(f"UPDATE {table} SET n = 5 WHERE k = ?", ("zzz",)) == 0
            assert tx.execute(f"DELETE FROM {table}") == 3

    def test_read_on_a_thread_with_no_transaction(self, storage: Storage, table: str) -> None:
        with storage.read() as r:
            assert r.query(f"SELECT k FROM {table}") == []
        with pytest.raises(Boom), storage.read():
            raise Boom
        with storage.transaction() as tx:  # a failed read leaves the thread clean
            self.insert(tx, table, "a")
        assert in_thread(lambda: self.keys(storage, table)) == ["a"]

    def test_read_one(self, storage: Storage, table: str) -> None:
        """One statement's first row: committed rows, None for no row, and inside a
        transaction the transaction's own writes; a failing statement leaves the thread
        clean."""
        assert storage.read_one(f"SELECT k FROM {table} WHERE k = ?", ("a",)) is None
        with storage.transaction() as tx:
            self.insert(tx, table, "a")
            assert storage.read_one(f"SELECT k FROM {table} WHERE k = ?", ("a",)) == {"k": "a"}
        assert in_thread(lambda: storage.read_one(f"SELECT COUNT(*) AS n FROM {table}")) == {"n": 1}
        with pytest.raises(Exception):  # noqa: B017 (each driver raises its own)
            storage.read_one("SELECT no_such_column FROM " + table)
        with storage.transaction() as tx:
            self.insert(tx, table, "b")
        assert self.keys(storage, table) == ["a", "b"]

    # -- savepoints -------------------------------------------------------------------

    def test_nested_failure_rolls_back_only_the_inner_block(
        self, storage: Storage, table: str
    ) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "a")
            with pytest.raises(Boom), storage.transaction() as inner:
                self.insert(inner, table, "b")
                inner.execute(f"UPDATE {table} SET n = 7 WHERE k = ?", ("a",))
                raise Boom
            assert [r["k"] for r in tx.query(f"SELECT k FROM {table}")] == ["a"]
            self.insert(tx, table, "c")
        assert self.keys(storage, table) == ["a", "c"]
        with storage.read() as r:
            assert r.one(f"SELECT n FROM {table} WHERE k = ?", ("a",)) == {"n": 0}

    def test_nested_success_is_undone_by_outer_failure(self, storage: Storage, table: str) -> None:
        with pytest.raises(Boom), storage.transaction() as tx:
            self.insert(tx, table, "a")
            with storage.transaction() as inner:
                self.insert(inner, table, "b")
            seen, peeker = self.peek_from_other_thread(storage, table)
            assert seen in ([], None)
            raise Boom
        peeker.join(THREAD_TIMEOUT)
        assert self.keys(storage, table) == []

    def test_three_levels_deep(self, storage: Storage, table: str) -> None:
        with storage.transaction() as one:
            self.insert(one, table, "1")
            with storage.transaction() as two:
                self.insert(two, table, "2")
                with pytest.raises(Boom), storage.transaction() as three:
                    self.insert(three, table, "3")
                    raise Boom
                self.insert(two, table, "4")
                with storage.transaction() as three:  # a sibling after a failed savepoint
                    self.insert(three, table, "5")
                    with pytest.raises(Boom), storage.transaction() as four:
                        self.insert(four, table, "6")
                        raise Boom
            with pytest.raises(Boom), storage.transaction() as two:
                self.insert(two, table, "7")
                with storage.transaction() as three:
                    self.insert(three, table, "8")
                raise Boom
            self.insert(one, table, "9")
        assert self.keys(storage, table) == ["1", "2", "4", "5", "9"]

    # -- unique violations ------------------------------------------------------------

    def test_duplicate_key_from_execute(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "a")
        with pytest.raises(DuplicateKey), storage.transaction() as tx:
            self.insert(tx, table, "new")
            self.insert(tx, table, "a")
        assert self.keys(storage, table) == ["a"]  # the whole transaction rolled back

    def test_duplicate_primary_key(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            row = tx.one(f"INSERT INTO {table} (k) VALUES (?) RETURNING id", ("a",))
            assert row is not None
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.execute(f"INSERT INTO {table} (id, k) VALUES (?, ?)", (row["id"], "b"))

    def test_duplicate_key_from_returning(self, storage: Storage, table: str) -> None:
        sql = f"INSERT INTO {table} (k, n) VALUES (?, ?) RETURNING id, k"
        with storage.transaction() as tx:
            first = tx.query(sql, ("a", 1))
            assert len(first) == 1 and first[0]["k"] == "a"
            assert isinstance(first[0]["id"], int)
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.query(sql, ("a", 2))
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.one(sql, ("a", 3))
            second = tx.one(sql, ("b", 4))
            assert second is not None and second["id"] != first[0]["id"]
        with storage.read() as r:
            assert r.query(f"SELECT k, n FROM {table} ORDER BY k") == [
                {"k": "a", "n": 1},
                {"k": "b", "n": 4},
            ]

    def test_transaction_usable_after_duplicate_in_savepoint(
        self, storage: Storage, table: str
    ) -> None:
        with storage.transaction() as tx:
            self.insert(tx, table, "a")
        with storage.transaction() as tx:
            self.insert(tx, table, "b")
            for _ in range(3):  # repeatedly: every savepoint is cleaned up
                with pytest.raises(DuplicateKey), storage.transaction() as inner:
                    self.insert(inner, table, "c")
                    self.insert(inner, table, "a")
            self.insert(tx, table, "d")
            assert [r["k"] for r in tx.query(f"SELECT k FROM {table} ORDER BY k")] == [
                "a",
                "b",
                "d",
            ]
        assert self.keys(storage, table) == ["a", "b", "d"]

    def test_partial_unique_index(self, migrated: Storage) -> None:
        storage = migrated
        wallet = (
            "INSERT INTO wallets (org_id, address, type, created_at, updated_at) "
            "VALUES (?, ?, 'tracked', ?, ?) RETURNING id"
        )
        args = ("org_1", "0xabc", NOW, NOW)
        with storage.transaction() as tx:
            tx.execute(
                "INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)",
                ("org_1", "Acme", NOW),
            )
            first = tx.one(wallet, args)
            assert first is not None
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.one(wallet, args)
            tx.execute("UPDATE wallets SET deleted_at = ? WHERE id = ?", (NOW, first["id"]))
            again = tx.one(wallet, args)  # the index only covers live rows
            assert again is not None and again["id"] != first["id"]
            with pytest.raises(DuplicateKey), storage.transaction() as inner:
                inner.execute(
                    "INSERT INTO recipients (org_id, number, address, label, created_at,"
                    " updated_at) VALUES (?, 1, ?, ?, ?, ?), (?, 2, ?, ?, ?, ?)",
                    ("org_1", "0x1", "x", NOW, NOW, "org_1", "0x1", "y", NOW, NOW),
                )
        with storage.read() as r:
            assert r.one("SELECT COUNT(*) AS n FROM wallets") == {"n": 2}
            assert r.one("SELECT COUNT(*) AS n FROM recipients") == {"n": 0}

    def test_on_conflict_do_nothing_returning(self, storage: Storage, table: str) -> None:
        sql = f"INSERT INTO {table} (k, n) VALUES (?, ?) ON CONFLICT (k) DO NOTHING RETURNING id"
        with storage.transaction() as tx:
            created = tx.query(sql, ("a", 1))
            assert len(created) == 1 and isinstance(created[0]["id"], int)
            assert tx.query(sql, ("a", 2)) == []
            assert tx.one(sql, ("a", 3)) is None
            assert (
                tx.execute(
                    f"INSERT INTO {table} (k, n) VALUES (?, ?) ON CONFLICT (k) DO NOTHING", ("a", 4)
                )
                == 0
            )
        with storage.read() as r:
            assert r.query(f"SELECT k, n FROM {table}") == [{"k": "a", "n": 1}]

    def test_on_conflict_do_update_returning(self, storage: Storage, table: str) -> None:
        sql = (
            f"INSERT INTO {table} (k, n) VALUES (?, ?) "
            "ON CONFLICT (k) DO UPDATE SET n = excluded.n RETURNING id, n"
        )
        with storage.transaction() as tx:
            first = tx.one(sql, ("a", 1))
            second = tx.one(sql, ("a", 2))
        assert first is not None and second is not None
        assert second == {"id": first["id"], "n": 2}

    # -- values and rows --------------------------------------------------------------

    def test_rows_are_dicts_by_column_name(self, storage: Storage, table: str) -> None:
        with storage.transaction() as tx:
            tx.execute(
                f"INSERT INTO {table} (k, n, s) VALUES (?, ?, ?), (?, ?, ?)",
                ("a", 1, "x", "b", 2, "y"),
            )
        with storage.read() as r:
            rows = r.query(f"SELECT k, n, s AS label FROM {table} ORDER BY k")
            assert rows == [{"k": "a", "n": 1, "label": "x"}, {"k": "b", "n": 2, "label": "y"}]
            assert all(type(row) is dict for row in rows)
            assert [list(row) for row in rows] == [["k", "n", "label"]] * 2  # column order
            assert r.query(f"SELECT k FROM {table} WHERE k = ?", ("none",)) == []
            assert r.one(f"SELECT k FROM {table} WHERE k = ?", ("none",)) is None
            assert r.one(f"SELECT k FROM {table} ORDER BY k DESC") == {"k": "b"}

    @pytest.mark.parametrize(
        "blob",
        [b"", b"\x00", b"\x00\xff\x00", bytes(range(256)), "é€😀".encode(), b"x" * 100_000],
        ids=["empty", "nul", "nul-ff", "all-bytes", "utf8", "100kB"],
    )
    def test_blobs_round_trip_exactly(self, storage: Storage, table: str, blob: bytes) -> None:
        with storage.transaction() as tx:
            tx.execute(f"INSERT INTO {table} (k, b) VALUES (?, ?)", ("a", blob))
            row = tx.one(f"SELECT b FROM {table} WHERE k = ?", ("a",))
            assert row is not None and type(row["b"]) is bytes and row["b"] == blob
        with storage.read() as r:
            row = r.one(f"SELECT b FROM {table} WHERE b = ?", (blob,))
            assert row is not None and type(row["b"]) is bytes and row["b"] == blob

    def test_nulls_integers_and_text_round_trip(self, storage: Storage, table: str) -> None:
        values = [0, 1, -1, 2**31 - 1, -(2**31)]  # the range of INTEGER in every dialect
        with storage.transaction() as tx:
            for i, n in enumerate(values):
                tx.execute(f"INSERT INTO {table} (k, n, s) VALUES (?, ?, ?)", (f"k{i}", n, "é"))
            tx.execute(
                f"INSERT INTO {table} (k, n, b, s) VALUES (?, ?, ?, ?)", ("z", None, None, None)
            )
        with storage.read() as r:
            rows = r.query(f"SELECT k, n, b, s FROM {table} ORDER BY id")
            assert [row["n"] for row in rows[:-1]] == values
            assert all(type(row["n"]) is int for row in rows[:-1])
            assert all(row["s"] == "é" for row in rows[:-1])
            assert rows[-1] == {"k": "z", "n": None, "b": None, "s": None}
            assert r.one(f"SELECT k FROM {table} WHERE n IS NULL") == {"k": "z"}
            ids = [row["id"] for row in r.query(f"SELECT id FROM {table} ORDER BY id")]
            assert all(type(i) is int for i in ids) and len(set(ids)) == len(ids)
            count = r.one(f"SELECT COUNT(*) AS n FROM {table}")
            assert count is not None and type(count["n"]) is int and count["n"] == 6

    def test_params_are_bound_not_interpolated(self, storage: Storage, table: str) -> None:
        tricky = "it's a '?' -- not; SQL"
        with storage.transaction() as tx:
            tx.execute(f"INSERT INTO {table} (k, s) VALUES (?, ?)", ("a", tricky))
        with storage.read() as r:
            assert r.one(f"SELECT s FROM {table} WHERE s = ?", (tricky,)) == {"s": tricky}
