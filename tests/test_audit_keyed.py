"""The keyed audit chain and its signed checkpoints (DESIGN §3 "Controls, second round").

An attacker with write access to the database (and not the master key) rewrites a chain
and re-hashes it, as `treasury audit verify` used to accept: each rewrite must now fail.
A cut tail or a deleted chain is consistent on its own; a checkpoint kept outside the
database catches it. Real SQLite files (or PostgreSQL), the real CLI."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from treasury import Treasury
from treasury._infra import audit
from treasury.cli import main

from .conftest import MASTER_KEY, Tenant, make_tenant, sealed
from .helpers import address


def cli(url: str, *args: str) -> Result:
    env = {"TREASURY_MASTER_KEY": MASTER_KEY}
    return CliRunner().invoke(main, ["--storage", url, "audit", *args], env=env)


def _rows(tx: Any, org_id: str) -> list[dict[str, Any]]:
    return tx.query(
        "SELECT org_id, seq, id, at, actor, operation, object_type, object_id, status,"
        " request_id, prev_hash, hash FROM audit_events WHERE org_id = ? ORDER BY seq",
        (org_id,),
    )


def rehash(tx: Any, org_id: str, digest: Callable[[bytes], str]) -> None:
    """What an attacker does after a rewrite: number the rows 1.. again, chain and hash
    each with `digest` (of the canonical JSON), and move the head to the end."""
    rows = _rows(tx, org_id)
    tx.execute("UPDATE audit_events SET seq = -seq WHERE org_id = ?", (org_id,))
    previous = audit.GENESIS
    for number, row in enumerate(rows, 1):
        event = {**audit.event_of(row), "prevHash": previous}
        new = digest(audit.canonical(event))
        tx.execute(
            "UPDATE audit_events SET seq = ?, prev_hash = ?, hash = ? WHERE id = ?",
            (number, previous, new, row["id"]),
        )
        previous = new
    tx.execute(
        "UPDATE audit_heads SET seq = ?, hash = ? WHERE org_id = ?", (len(rows), previous, org_id)
    )


def _sha256(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


def _wrong_key(text: bytes) -> str:
    return hmac.new(b"k" * 32, text, hashlib.sha256).hexdigest()


@pytest.fixture
def acme(treasury: Treasury, tenant: Tenant) -> Tenant:
    for number in range(4):
        tenant.org.recipients.create(
            address=address(), label=f"R{number}", idempotency_key=f"a{number}"
        )
    sealed(treasury)
    return tenant


REWRITES: dict[str, Callable[[Any, str], None]] = {
    "a deletion": lambda tx, org: tx.execute(
        "DELETE FROM audit_events WHERE org_id = ? AND seq = 3", (org,)
    ),
    "an edited approver": lambda tx, org: tx.execute(
        "UPDATE audit_events SET actor = ? WHERE org_id = ? AND seq = 4",
        ('{"apiKeyId":"key_other","userId":"mallory"}', org),
    ),
    "a forged event": lambda tx, org: tx.execute(
        "INSERT INTO audit_events (org_id, seq, id, at, actor, operation, object_type,"
        " object_id, status, request_id, prev_hash, hash) VALUES (?, 99, 'aud_forged',"
        " '2026-01-01T00:00:00.000000+00:00', '{\"admin\":true}', 'recipients.delete',"
        " 'recipient', '1', 200, NULL, '', '')",
        (org,),
    ),
}


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
@pytest.mark.parametrize("digest", [_sha256, _wrong_key], ids=["sha256", "another-key"])
def test_a_rewritten_chain_rehashed_without_the_master_key_fails_verify(
    treasury: Treasury, storage_url: str, acme: Tenant, rewrite: str, digest: Any
) -> None:
    assert cli(storage_url, "verify").exit_code == 0
    with treasury.storage.transaction() as tx:
        REWRITES[rewrite](tx, acme.org.id)
        rehash(tx, acme.org.id, digest)
    result = cli(storage_url, "verify", "--json")
    assert result.exit_code == 1, result.output
    details = json.loads(result.stderr)["details"]
    assert details["organizationId"] == acme.org.id
    assert "keyed hash" in details["problem"]


def _rechained(text: bytes) -> str:
    """What the database computes, ``sha256_hex(tag || previous)``, with the tag guessed
    (the SHA-256 of the event's content): the tag itself is never stored."""
    event = json.loads(text)
    previous = event.pop("prevHash")
    return audit.chained(_sha256(audit.canonical(event)), previous)


def test_a_deletion_rechained_as_the_database_chains_fails_verify(
    treasury: Treasury, acme: Tenant
) -> None:
    """The database chains each event's keyed tag to its predecessor's hash in plain
    SHA-256; without the tag (which only the process holds), an event cannot be chained
    after another predecessor."""
    with treasury.storage.transaction() as tx:
        REWRITES["a deletion"](tx, acme.org.id)
        rehash(tx, acme.org.id, _rechained)
    _, broken = treasury.verify_audit_log()
    assert broken is not None and broken.org_id == acme.org.id
    assert "keyed hash" in broken.problem


def test_events_of_the_first_keyed_chains_still_verify(treasury: Treasury, acme: Tenant) -> None:
    """Events hashed as the first keyed chains were (the HMAC of the canonical JSON with
    its previous hash, migration 20) verify, and the chain goes on after them."""
    key = audit.audit_key(treasury._runtime.secrets)
    with treasury.storage.transaction() as tx:
        rehash(tx, acme.org.id, lambda text: hmac.new(key, text, hashlib.sha256).hexdigest())
        (row,) = _rows(tx, acme.org.id)[-1:]
    assert row["hash"] == audit.first_keyed_hash_of(audit.event_of(row), key)
    acme.org.recipients.create(address=address(), label="after", idempotency_key="after")
    assert treasury.verify_audit_log() == (7, None)  # the organization, its key, 5 recipients
    with treasury.storage.transaction() as tx:  # an old-form event altered: caught
        tx.execute(
            "UPDATE audit_events SET status = 418 WHERE org_id = ? AND seq = 2", (acme.org.id,)
        )
    _, broken = treasury.verify_audit_log()
    assert broken is not None and broken.seq == 2


def test_an_event_hash_is_keyed_not_a_plain_sha256(treasury: Treasury, acme: Tenant) -> None:
    with treasury.storage.read() as tx:
        rows = _rows(tx, acme.org.id)
    for row in rows:
        assert row["hash"] != _sha256(audit.canonical(audit.event_of(row)))
    assert treasury.verify_audit_log() == (len(rows), None)


def _checkpoint(url: str, tmp_path: Path, *args: str) -> Path:
    result = cli(url, "checkpoint", *args)
    assert result.exit_code == 0, result.output
    path = tmp_path / "checkpoint.json"
    path.write_text(result.stdout)
    return path


def test_a_checkpoint_catches_a_cut_tail_and_a_deleted_chain(
    treasury: Treasury, storage_url: str, acme: Tenant, tmp_path: Path
) -> None:
    globex = make_tenant(treasury, "Globex", "user_g")
    saved = _checkpoint(storage_url, tmp_path)
    entries = json.loads(saved.read_text())["data"]
    assert {e["orgId"] for e in entries} == {acme.org.id, globex.org.id}
    assert all(set(e) == {"orgId", "eventId", "hash", "at", "signature"} for e in entries)
    acme.org.recipients.create(address=address(), label="later", idempotency_key="later")
    assert cli(storage_url, "verify", "--checkpoint", str(saved)).exit_code == 0

    # a cut tail, the head moved back: consistent on its own, caught by the checkpoint
    with treasury.storage.transaction() as tx:
        rows = _rows(tx, acme.org.id)
        tx.execute("DELETE FROM audit_events WHERE org_id = ? AND seq >= 5", (acme.org.id,))
        fourth = rows[3]
        tx.execute(
            "UPDATE audit_heads SET seq = 4, prev_hash = ?, hash = ? WHERE org_id = ?",
            (fourth["prev_hash"], fourth["hash"], acme.org.id),
        )
    assert cli(storage_url, "verify").exit_code == 0  # what a keyed chain alone cannot see
    cut = cli(storage_url, "verify", "--checkpoint", str(saved))
    assert cut.exit_code == 1 and acme.org.id in cut.stderr and "checkpoint" in cut.stderr


def test_a_checkpoint_catches_another_organizations_deleted_chain(
    treasury: Treasury, storage_url: str, acme: Tenant, tmp_path: Path
) -> None:
    globex = make_tenant(treasury, "Globex", "user_g")
    saved = _checkpoint(storage_url, tmp_path)
    with treasury.storage.transaction() as tx:
        tx.execute("DELETE FROM audit_events WHERE org_id = ?", (globex.org.id,))
        tx.execute("DELETE FROM audit_heads WHERE org_id = ?", (globex.org.id,))
    assert cli(storage_url, "verify").exit_code == 0
    gone = cli(storage_url, "verify", "--checkpoint", str(saved), "--json")
    assert gone.exit_code == 1
    assert json.loads(gone.stderr)["details"]["organizationId"] == globex.org.id
    # a forged checkpoint (its hash changed) does not verify either
    forged = json.loads(saved.read_text())
    forged["data"][0]["hash"] = "0" * 64
    saved.write_text(json.dumps(forged))
    assert "signature" in cli(storage_url, "verify", "--checkpoint", str(saved)).stderr


def test_the_public_key_checks_a_checkpoint_signature(
    storage_url: str, acme: Tenant, tmp_path: Path
) -> None:
    saved = _checkpoint(storage_url, tmp_path, "--org", acme.org.id)
    (entry,) = json.loads(saved.read_text())["data"]
    assert entry["orgId"] == acme.org.id
    shown = cli(storage_url, "public-key").stdout.strip()
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(shown))
    signed = {k: entry[k] for k in ("orgId", "eventId", "hash", "at")}
    text = json.dumps(signed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    key.verify(base64.b64decode(entry["signature"]), text.encode())  # raises if not


def test_a_chain_written_before_the_key_is_keyed_on_upgrade(
    treasury: Treasury, acme: Tenant
) -> None:
    """Migration 20's step (`audit.rekey`) re-hashes an intact unkeyed chain, as chains
    were written before it, with the key; it leaves a broken one broken."""
    other = make_tenant(treasury, "Globex", "user_g")
    sealed(treasury)
    with treasury.storage.transaction() as tx:
        rehash(tx, acme.org.id, _sha256)  # as written before the chain was keyed
        rehash(tx, other.org.id, _sha256)
        tx.execute(
            "UPDATE audit_events SET status = 418 WHERE org_id = ? AND seq = 1", (other.org.id,)
        )
    assert treasury.verify_audit_log()[1] is not None
    with treasury.storage.transaction() as tx:
        audit.rekey(tx, audit.audit_key(treasury._runtime.secrets))
    _, broken = treasury.verify_audit_log()
    assert broken is not None and broken.org_id == other.org.id  # still broken
    with treasury.storage.transaction() as tx:
        tx.execute("DELETE FROM audit_events WHERE org_id = ?", (other.org.id,))
        tx.execute("DELETE FROM audit_heads WHERE org_id = ?", (other.org.id,))
    assert treasury.verify_audit_log()[1] is None  # Acme's chain keyed and intact
