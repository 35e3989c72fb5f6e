"""Test support shipped with the library: conformance suites and a loopback server.

Every implementation of a plugin group, ours and third parties', runs its group's suite:

* `treasury.testing.storage.StorageSuite` — a `Storage` backend's primitives (fixture ``storage``)
* `treasury.testing.statements.StatementSuite` — the library's own statements on that
  storage: idempotency, guarded updates, keyset pages, numbering (fixture ``storage``)
* `treasury.testing.chain.ChainSuite` — a `Chain` backend (fixtures ``chain`` and ``fund``)
* `treasury.testing.fiat.FiatSuite` — a `FiatProvider` (fixture ``fiat``)
* `treasury.testing.custody.CustodySuite` — a `Custody`, bound (fixture ``custody``; the
  suite's ``context`` fixture gives a `CustodyContext` to bind it with)

For example::

    from treasury.testing.storage import StorageSuite

    class TestMyStorage(StorageSuite):
        @pytest.fixture
        def storage(self, tmp_path): ...

`treasury.testing.server.serve(app)` runs a WSGI app on a free loopback port, and
`treasury.testing.fake_provider.fake_provider()` a fake of the fiat provider's REST API
(a real HTTP server with its state machine and injectable failures), for the ``http``
fiat plugin and its callers. `FiatSuite` subclasses also give a ``settle`` fixture that
makes an off-ramp's deposit arrive.
"""

__all__: list[str] = []  # each suite is imported from its module
