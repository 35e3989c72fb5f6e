"""`StatementSuite`'s page tests: keyset pages (`keyset_page`) and their cursors (`Cursors`)."""

from __future__ import annotations

import contextlib
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treasury._infra.pagination import Cursors
from treasury._infra.sql import keyset_page
from treasury.backends.storage.base import Storage
from treasury.errors import ValidationError

ORG, OTHER_ORG = "org_pages", "org_other"
#: Few distinct timestamps for many rows: most rows tie on created_at, only id orders them.
STAMPS = [f"2024-01-0{day}T00:00:00.000000Z" for day in range(1, 6)]
ROWS = 60  # a quarter of them another organization's


def cursor_error(cursors: Cursors, org_id: str, cursor: str) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        cursors.decode(org_id, cursor)
    return caught.value


def flip(text: str, index: int) -> str:
    """`text` with the character at `index` replaced by another base64url character."""
    other = "A" if text[index] != "A" else "B"
    return text[:index] + other + text[index + 1 :]


class PageTests:
    """Keyset pagination and cursors on the ``storage`` fixture."""

    @pytest.fixture
    def pages(self, storage: Storage) -> Iterator[tuple[str, list[tuple[str, int]]]]:
        """A scratch table (id, org_id, created_at) and its `ORG` rows' (created_at, id),
        newest first; another organization's rows are mixed in."""
        name = f"scratch_{uuid.uuid4().hex[:12]}"
        with storage.transaction() as tx:
            tx.execute(
                f"CREATE TABLE {name} (id {{pk}}, org_id TEXT NOT NULL, created_at TEXT NOT NULL)".format(
                    **storage.types
                )
            )
            mine = []
            for i in range(ROWS):
                org_id = OTHER_ORG if i % 4 == 3 else ORG
                stamp = STAMPS[(i * 7) % len(STAMPS)]  # not in id order
                row = tx.one(
                    f"INSERT INTO {name} (org_id, created_at) VALUES (?, ?) RETURNING id",
                    (org_id, stamp),
                )
                assert row is not None
                if org_id == ORG:
                    mine.append((stamp, int(row["id"])))
        yield name, sorted(mine, reverse=True)
        with contextlib.suppress(Exception), storage.transaction() as tx:
            tx.execute(f"DROP TABLE IF EXISTS {name}")

    @settings(
        max_examples=12,
        deadline=None,
        # the fixtures are read-only here; subclasses are the differing executors
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )
    @given(data=st.data())
    def test_keyset_pages_partition_the_rows(
        self, storage: Storage, pages: tuple[str, list[tuple[str, int]]], data: st.DataObject
    ) -> None:
        """Pages at any limits, through cursors, are every row once, newest first."""
        name, expected = pages
        cursors = Cursors(secrets.token_bytes(32), "scratch")
        select = f"SELECT id, org_id, created_at FROM {name} WHERE org_id = ?"
        seen: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(len(expected) + 1):
            limit = data.draw(st.integers(min_value=1, max_value=ROWS), label="limit")
            after = None if cursor is None else cursors.decode(ORG, cursor)
            with storage.read() as tx:
                rows, position = keyset_page(tx, select, (ORG,), after, limit)
            seen += rows
            if position is None:
                assert len(rows) <= limit
                break
            assert len(rows) == limit  # only the last page is short
            assert position == (rows[-1]["created_at"], rows[-1]["id"])
            cursor = cursors.encode(ORG, position)
        else:
            pytest.fail("pagination did not end")
        assert [(row["created_at"], row["id"]) for row in seen] == expected
        assert {row["org_id"] for row in seen} == {ORG}

    def test_keyset_page_of_nothing(self, storage: Storage, pages: Any) -> None:
        name, _ = pages
        select = f"SELECT id FROM {name} WHERE org_id = ?"
        with storage.read() as tx:
            assert keyset_page(tx, select, ("org_none",), None, 10) == ([], None)
            last = keyset_page(tx, select, (ORG,), ("0000", 0), 10)  # before every row
            assert last == ([], None)

    def test_cursor_round_trip(self) -> None:
        cursors = Cursors(secrets.token_bytes(32), "scratch")
        for position in [(STAMPS[0], 1), (STAMPS[-1], 2**63 - 1), ("é €", 0)]:
            cursor = cursors.encode(ORG, position)
            assert cursor.isascii() and "/" not in cursor and "+" not in cursor
            assert cursors.decode(ORG, cursor) == position

    def test_bad_cursors_are_400s_on_cursor(self) -> None:
        key = secrets.token_bytes(32)
        cursors = Cursors(key, "scratch")
        good = cursors.encode(ORG, (STAMPS[0], 42))
        payload, tag = good.split(".")
        bad = {
            "tampered payload": flip(payload, 0) + "." + tag,
            "tampered tag": payload + "." + flip(tag, 0),
            "truncated": good[:-2],
            "payload only": payload,
            "half": good[: len(good) // 2],
            "empty": "",
            "not base64": "%%%.%%%",
            "not ascii": "é.é",
            "forged": Cursors(secrets.token_bytes(32), "scratch").encode(ORG, (STAMPS[0], 42)),
            "another list": Cursors(key, "other").encode(ORG, (STAMPS[0], 42)),
        }
        for case, cursor in bad.items():
            error = cursor_error(cursors, ORG, cursor)
            assert error.status == 400, case
            assert [f["field"] for f in (error.details or {})["fields"]] == ["cursor"], case
        other = cursor_error(cursors, OTHER_ORG, good)  # another organization's cursor
        assert [f["field"] for f in (other.details or {})["fields"]] == ["cursor"]
        assert Cursors(key, "scratch").decode(ORG, good) == (STAMPS[0], 42)  # not the instance
