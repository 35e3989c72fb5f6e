"""Test support shipped with the library: conformance suites and a loopback server.

Third-party backends run the same suites as ours, e.g.::

    from treasury.testing.storage import StorageSuite

    class TestMyStorage(StorageSuite):
        @pytest.fixture
        def storage(self, tmp_path): ...

`treasury.testing.server.serve(app)` runs a WSGI app on a free loopback port.
"""
