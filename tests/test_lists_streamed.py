"""Lists without bound (wallets, recipients) are read from the store and written to the
client in chunks: the same bytes as the whole list, never the whole list in memory.
(The memory it saves is measured by benchmarks/lists.py.)"""

from __future__ import annotations

import httpx

from .helpers import address

ROWS = 250  # two full chunks of 100 and a partial one


def _fill(tenant, n: int = ROWS) -> None:
    for i in range(n):
        tenant.org.recipients.create(address=address(), label=f"R {i % 37:02d}")


def test_recipients_come_from_the_store_in_chunks(tenant):
    _fill(tenant)
    sizes = [len(chunk) for chunk in tenant.org.recipients.chunks()]
    assert sizes == [100, 100, 50]
    tenant.org.recipients.create(address=address(), label="after")  # the snapshot is closed
    assert tenant.org.recipients.list().count == ROWS + 1


def test_a_streamed_list_is_the_whole_list_byte_for_byte(client, tenant):
    _fill(tenant)
    tenant.org.recipients.delete(7)
    for query in ({}, {"sort": "label", "order": "desc"}, {"sort": "created_at"}):
        with client.stream("GET", "/v1/recipients", params=query) as r:
            assert r.status_code == 200 and "content-length" not in r.headers  # streamed
            assert r.headers["content-type"] == "application/json"
            assert r.headers["x-ratelimit-limit"] == "100"
            body = r.read()
        assert body == tenant.org.recipients.list(query).model_dump_json().encode()
    assert httpx.Response(200, content=body).json()["count"] == ROWS - 1


def test_an_empty_list_and_a_bad_query_keep_their_shape(client):
    assert client.get("/v1/recipients").content == b'{"data":[],"count":0}'
    assert client.get("/v1/wallets").json() == {"data": [], "count": 0}
    r = client.get("/v1/recipients", params={"sort": "nope"})
    assert r.status_code == 400 and r.json()["details"]["fields"][0]["field"] == "sort"


def test_wallets_are_streamed_too(client, tenant):
    for i in range(3):
        tenant.org.wallets.track(address=address(), label=f"W{i}")
    with client.stream("GET", "/v1/wallets", params={"sort": "label"}) as r:
        assert "content-length" not in r.headers
        body = r.read()
    assert body == tenant.org.wallets.list(sort="label").model_dump_json().encode()


def test_a_failure_in_the_middle_cuts_the_answer_never_a_shorter_list(
    treasury, tenant, monkeypatch
):
    """Through `serve`'s waitress: the chunked answer ends without its last chunk."""
    import threading

    import pytest
    from waitress import wasyncore

    from treasury.http import create_app
    from treasury.http._server import create_server
    from treasury.recipients import store

    _fill(tenant)
    every = store.every

    def failing(*args):
        chunks = every(*args)
        yield next(chunks)
        raise RuntimeError("the database went away")

    monkeypatch.setattr(store, "every", failing)
    server = create_server(
        create_app(treasury),
        host="127.0.0.1",
        port=0,
        threads=2,
        connection_limit=100,
        channel_timeout=30,
        max_body_bytes=1024,
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.effective_port}/v1/recipients"
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.get(url, headers={"x-api-key": tenant.secret}, timeout=10)
    finally:
        server.task_dispatcher.shutdown()
        wasyncore.close_all(server._map)
        thread.join(timeout=10)
