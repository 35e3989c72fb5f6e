"""The storage conformance suite: what every `Storage` backend must get right.

Subclass `StorageSuite` in a test module and provide a ``storage`` fixture that yields a
fresh store (empty or already migrated, either works) and closes it afterwards::

    import pytest
    from treasury.testing.storage import StorageSuite

    class TestMyStorage(StorageSuite):
        @pytest.fixture
        def storage(self, tmp_path):
            store = MyStorage.from_url(...)
            yield store
            store.close()

The suite speaks only the portable SQL of `treasury.backends.storage.base` (``?``
placeholders, ``RETURNING``, ``ON CONFLICT``, partial indexes, ``{pk}``/``{blob}`` from
`Storage.types`), so it runs unchanged on any dialect. Scratch tables get unique names
and are dropped afterwards. `StorageSuite.test_close` closes the store itself, so the
fixture's own ``close()`` is then a second call, which must be harmless.

The tests live in two mixins over `StorageBase` (fixtures and helpers):
`StorageBasics` (migrations, transactions, savepoints, constraints, values) and
`StorageConcurrency` (threads, ``close``).
"""

from __future__ import annotations

from treasury.testing._storage_base import (
    LATER,
    LATEST,
    NOW,
    TABLES,
    StorageBase,
    recorded_versions,
)
from treasury.testing._storage_basics import StorageBasics
from treasury.testing._storage_concurrency import StorageConcurrency
from treasury.testing._support import (
    THREAD_TIMEOUT,
    Boom,
    Interrupt,
    in_thread,
    run_threads,
)

__all__ = [
    "LATER",
    "LATEST",
    "NOW",
    "TABLES",
    "THREAD_TIMEOUT",
    "Boom",
    "Interrupt",
    "StorageBase",
    "StorageSuite",
    "in_thread",
    "recorded_versions",
    "run_threads",
]


class StorageSuite(StorageBasics, StorageConcurrency):
    """Conformance tests for a `Storage`; subclasses provide the ``storage`` fixture."""
