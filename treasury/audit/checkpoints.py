"""Signed checkpoints of the audit chains (`treasury audit checkpoint`, `verify
--checkpoint`): what a keyed chain cannot show alone, a chain cut short with its head
moved back, or deleted whole, shows against a checkpoint kept outside the database.

A checkpoint entry is ``{orgId, eventId, hash, at, signature}``: the organization's last
event when it was taken (its id, its hash, its time) and the base64 Ed25519 signature of
the canonical JSON of the other four fields, under a key derived from the master key
(purpose "audit-checkpoint"); `public_key` is its public half, to check a checkpoint
without the master key.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from .._infra.crypto import SecretBox
from ..backends.storage.base import Storage
from .verify import BrokenLink

PURPOSE = "audit-checkpoint"
_FIELDS = ("orgId", "eventId", "hash", "at")


def _signing_key(box: SecretBox) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(box.derive(PURPOSE))


def public_key(box: SecretBox) -> str:
    """The checkpoints' Ed25519 public key, base64 of its 32 raw bytes."""
    raw = _signing_key(box).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def _signed_text(entry: Mapping[str, Any]) -> bytes:
    fields = {name: entry[name] for name in _FIELDS}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def take(storage: Storage, box: SecretBox, org_id: str | None = None) -> list[dict[str, Any]]:
    """One signed entry per organization that has a chain (or only `org_id`'s)."""
    sql = (
        "SELECT e.org_id, e.id, e.hash, e.at FROM audit_heads AS h JOIN audit_events AS e"
        " ON e.org_id = h.org_id AND e.seq = h.seq"
    )
    args: tuple[Any, ...] = ()
    if org_id is not None:
        sql, args = sql + " WHERE h.org_id = ?", (org_id,)
    with storage.read() as tx:
        rows = tx.query(sql + " ORDER BY h.org_id", args)
    key = _signing_key(box)
    entries = []
    for row in rows:
        entry: dict[str, Any] = {
            "orgId": row["org_id"],
            "eventId": row["id"],
            "hash": row["hash"],
            "at": row["at"],
        }
        entry["signature"] = base64.b64encode(key.sign(_signed_text(entry))).decode()
        entries.append(entry)
    return entries


def check(
    storage: Storage, box: SecretBox, entries: Iterable[Mapping[str, Any]]
) -> BrokenLink | None:
    """The first checkpoint entry the chains no longer reach: a bad signature, or its
    event missing from its organization's chain or with another hash. (That the chain
    up to it holds is `verify_chains`' part.)"""
    verifier: Ed25519PublicKey = _signing_key(box).public_key()
    for entry in entries:
        org_id = str(entry.get("orgId"))
        try:
            verifier.verify(base64.b64decode(str(entry["signature"])), _signed_text(entry))
        except (KeyError, ValueError, InvalidSignature):
            return BrokenLink(org_id, 0, None, "the checkpoint's signature does not verify")
        with storage.read() as tx:
            row = tx.one(
                "SELECT seq, hash FROM audit_events WHERE org_id = ? AND id = ?",
                (org_id, entry["eventId"]),
            )
        if row is None:
            problem = (
                f"the chain no longer reaches its checkpoint (event {entry['eventId']}"
                " missing: a deleted chain or a cut tail)"
            )
            return BrokenLink(org_id, 0, str(entry["eventId"]), problem)
        if row["hash"] != entry["hash"]:
            problem = "the checkpoint's event has another hash now (the chain was rewritten)"
            return BrokenLink(org_id, int(row["seq"]), str(entry["eventId"]), problem)
    return None


def parse(text: str) -> list[dict[str, Any]]:
    """The entries of a checkpoint document (``{"data": [...]}``); `ValueError` if it
    is not one."""
    document = json.loads(text)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise ValueError('not a checkpoint: expected {"data": [...]}')
    entries: list[dict[str, Any]] = document["data"]
    if not all(isinstance(e, dict) and set(_FIELDS) <= set(e) for e in entries):
        raise ValueError(f"not a checkpoint: each entry needs {', '.join(_FIELDS)}, signature")
    return entries
