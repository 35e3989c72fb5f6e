"""Webhook delivery when things go wrong: a worker killed mid-batch, a name that resolves to
a private address by the time of delivery, an https target with an untrusted certificate."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from ipaddress import ip_address
from pathlib import Path

import pytest

from treasury import Treasury
from treasury.webhooks import targets

from .conftest import MASTER_KEY, make_tenant
from .test_webhook_delivery import deliveries, event
from .webhook_receiver import receiving

WORKER = textwrap.dedent(
    """
    import sys
    from treasury import Treasury
    t = Treasury.open(sys.argv[1], master_key="0" * 64, chains={},
                      allow_private_webhook_urls=True)
    while True:
        t.run_once()
    """
)


def test_a_worker_killed_mid_batch_loses_no_delivery(new_storage_url):
    db = new_storage_url("k.db")
    now = [datetime.now(UTC)]
    t = Treasury.open(
        db, master_key=MASTER_KEY, chains={}, clock=lambda: now[0], allow_private_webhook_urls=True
    )
    org = make_tenant(t).org
    with receiving() as rx:
        release = threading.Event()

        def held(got: object) -> int:
            release.wait(60)  # the batch is in flight when the worker dies
            return 204

        rx.decide = held
        org.webhooks.create(url=rx.at(), events=["transaction.confirmed"])
        for _ in range(100):
            event(t, org.id)
        worker = subprocess.Popen([sys.executable, "-c", WORKER, db], stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while len(rx.got) < 10:
                assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.05)
            worker.kill()  # SIGKILL, mid-batch
            worker.wait(10)
        finally:
            if worker.poll() is None:
                worker.kill()
            rx.decide = None  # answer at once from now on
            release.set()
        before = set(rx.ids())
        assert Counter(d["status"] for d in deliveries(t))["pending"] > 0  # work was cut off
        now[0] += timedelta(seconds=60)  # past the dead worker's lease
        for _ in range(3):
            t.run_once()
        assert Counter(d["status"] for d in deliveries(t)) == {"delivered": 100}
        received = Counter(rx.ids())
        assert len(received) == 100  # every event, at least once
        assert before <= set(received)  # the same ids: re-sent, not re-made
    t.close()


def test_a_name_that_resolves_to_a_private_address_at_delivery_is_not_contacted(
    new_storage_url, monkeypatch
):
    """A resolver test double (DNS answers cannot be changed here): the name resolves to a
    public address at registration, to the receiver's loopback address at delivery."""
    with receiving() as rx:
        port = int(rx.url.rsplit(":", 1)[1])
        answers = {"now": "93.184.215.14"}
        monkeypatch.setattr(targets, "resolve", lambda host, port: [ip_address(answers["now"])])
        t = Treasury.open(new_storage_url("r.db"), master_key=MASTER_KEY, chains={})
        org = make_tenant(t).org
        hook = org.webhooks.create(
            url=f"http://hooks.example.test:{port}/hook", events=["transaction.confirmed"]
        )
        answers["now"] = "127.0.0.1"  # rebound
        event(t, org.id)
        summary = t.run_once()
        assert summary["webhooks_retried"] == 1 and rx.got == []  # not contacted
        delivery = org.webhooks.deliveries(hook.id).data[0]
        assert "non-public address (127.0.0.1 in 127.0.0.0/8, Loopback" in (
            delivery.last_error or ""
        )
        t.close()


def test_a_checked_address_is_pinned_with_the_name_kept(monkeypatch):
    monkeypatch.setattr(targets, "resolve", lambda host, port: [ip_address("93.184.215.14")])
    pinned = targets.pin("https://hooks.example.com/in?x=1", allow_private=False)
    assert pinned.url == "https://93.184.215.14:443/in?x=1"
    assert pinned.host == "hooks.example.com" and pinned.sni == "hooks.example.com"
    monkeypatch.setattr(targets, "resolve", lambda host, port: [ip_address("2606:4700::1111")])
    assert targets.pin("http://h.example:8080/", allow_private=False).url == (
        "http://[2606:4700::1111]:8080/"
    )
    monkeypatch.setattr(
        targets, "resolve", lambda host, port: [ip_address("93.184.215.14"), ip_address("10.0.0.1")]
    )
    with pytest.raises(targets.TargetRefused, match=r"10\.0\.0\.1"):
        targets.pin("http://h.example/", allow_private=False)


def test_an_https_target_gets_its_name_and_an_untrusted_certificate_is_refused(
    new_storage_url, tmp_path
):
    """A real TLS listener on loopback with a self-signed certificate for ``localhost``:
    the dispatcher sends the target's name (SNI) and refuses the certificate, which no
    public authority signed, so nothing is delivered and the error says why."""
    cert, key = _self_signed(tmp_path, "localhost")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        conn, _ = listener.accept()
        with conn, contextlib.suppress(OSError):
            context.wrap_socket(conn, server_side=True).close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    t = Treasury.open(
        new_storage_url("tls.db"),
        master_key=MASTER_KEY,
        chains={},
        allow_private_webhook_urls=True,
    )
    org = make_tenant(t).org
    hook = org.webhooks.create(
        url=f"https://localhost:{port}/hook", events=["transaction.confirmed"]
    )
    event(t, org.id)
    assert t.run_once()["webhooks_retried"] == 1
    thread.join(timeout=10)
    listener.close()
    assert names == ["localhost"]
    delivery = org.webhooks.deliveries(hook.id).data[0]
    assert delivery.status == "pending" and "CERTIFICATE_VERIFY_FAILED" in (
        delivery.last_error or ""
    )
    t.close()


def _self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
