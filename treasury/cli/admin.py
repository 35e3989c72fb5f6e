"""Set up and administer: ``init``, ``orgs``, ``keys`` and ``audit``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click

from ..admin import Organization
from ..admin.scopes import SCOPES
from ..audit import checkpoints
from ..errors import ValidationError
from ._shared import (
    command,
    emit,
    fail,
    key_status,
    open_treasury,
    parse_expiry,
    redacted,
    secret_lines,
    table,
    when,
)


@click.command()
@click.option(
    "--org-name", default="My organization", show_default=True, help="First organization."
)
@click.option("--user-id", default="admin", show_default=True, help="User the first key acts as.")
@click.option("--force", is_flag=True, help="Add another organization if some already exist.")
@command
@click.pass_context
def init(ctx: click.Context, org_name: str, user_id: str, force: bool) -> None:
    """Create the database, its first organization and first API key. On a database that
    already has organizations it changes nothing and says so (exit 0), unless --force."""
    t = open_treasury(ctx)
    existing = t.admin.list_organizations()
    if existing and not force:
        emit(
            ctx,
            {"alreadyInitialized": True, "organizations": [o.to_json() for o in existing]},
            lambda: [
                f"{redacted(t.settings.storage)} is already initialized"
                f" ({len(existing)} organization(s)); nothing changed. Use --force to add"
                " another organization, or `treasury keys create ORG_ID` for a new key."
            ],
        )
        return
    org = t.admin.create_organization(org_name)
    key = t.admin.create_api_key(org.id, user_id=user_id)
    emit(
        ctx,
        {"organization": org.to_json(), "apiKey": key.to_json()},
        lambda: [
            f"Initialized {redacted(t.settings.storage)}",
            f"Organization {org.id} ({org.name})",
            *secret_lines(key),
        ],
    )


@click.group()
def orgs() -> None:
    """Organizations."""


@orgs.command("create")
@click.argument("name")
@command
@click.pass_context
def orgs_create(ctx: click.Context, name: str) -> None:
    """Create an organization named NAME."""
    org = open_treasury(ctx).admin.create_organization(name)
    emit(ctx, org.to_json(), lambda: [f"Organization {org.id} ({org.name})"])


@orgs.command("list")
@command
@click.pass_context
def orgs_list(ctx: click.Context) -> None:
    """List organizations, oldest first."""
    found: list[Organization] = open_treasury(ctx).admin.list_organizations()
    emit(
        ctx,
        {"data": [o.to_json() for o in found], "count": len(found)},
        lambda: table(
            ("ID", "NAME", "CREATED"), [(o.id, o.name, when(o.created_at)) for o in found]
        ),
    )


@orgs.command("onboard")
@click.argument("org_id")
@click.option("--email", help="The business's contact email, where the provider asks for one.")
@command
@click.pass_context
def orgs_onboard(ctx: click.Context, org_id: str, email: str | None) -> None:
    """Start organization ORG_ID's onboarding with the fiat provider (its hosted KYB
    link), or show where it stands; fiat operations answer 409 until it is approved.
    A provider whose link needs the business's contact email: without --email (or one
    configured on the fiat backend) it fails, naming --email."""
    try:
        found = open_treasury(ctx).admin.start_onboarding(org_id, email=email)
    except ValidationError as error:
        named = [problem.get("field") for problem in (error.details or {}).get("fields", [])]
        if email is None and "email" in named:
            hint = "pass --email EMAIL (the business's contact email)"
            fail(ctx, f"{error.message}: {hint}", error.details)
        raise
    emit(
        ctx,
        found.to_json(),
        lambda: [
            f"Onboarding {found.status}",
            *([f"Complete it at {found.url}"] * bool(found.url)),
        ],
    )


@click.group()
def keys() -> None:
    """API keys (secrets are shown once, on creation)."""


@keys.command("create")
@click.argument("org_id")
@click.option("--user-id", default="admin", show_default=True, help="User the key acts as.")
@click.option(
    "--expires-at",
    metavar="ISO8601",
    callback=parse_expiry,
    help="Expiry, e.g. 2030-01-01T00:00:00Z (UTC if no offset) [default: never].",
)
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(SCOPES),
    help="What the key may do; repeat for several [default: admin].",
)
@command
@click.pass_context
def keys_create(
    ctx: click.Context,
    org_id: str,
    user_id: str,
    expires_at: datetime | None,
    scopes: tuple[str, ...],
) -> None:
    """Create an API key for organization ORG_ID and print its secret once."""
    key = open_treasury(ctx).admin.create_api_key(
        org_id, user_id=user_id, expires_at=expires_at, scopes=scopes or None
    )
    emit(ctx, key.to_json(), lambda: secret_lines(key))


@keys.command("list")
@click.option("--org", "org_id", metavar="ORG_ID", help="Only this organization's keys.")
@command
@click.pass_context
def keys_list(ctx: click.Context, org_id: str | None) -> None:
    """List API keys, oldest first (never their secrets)."""
    t = open_treasury(ctx)
    if org_id is not None:
        t.admin.get_organization(org_id)
    found = t.admin.list_api_keys(org_id)
    now = t.now()
    emit(
        ctx,
        {"data": [k.to_json() for k in found], "count": len(found)},
        lambda: table(
            ("ID", "ORGANIZATION", "USER", "SCOPES", "STATUS", "CREATED", "EXPIRES"),
            [
                (
                    k.id,
                    k.organization_id,
                    k.user_id,
                    ",".join(k.scopes),
                    key_status(k, now),
                    when(k.created_at),
                    when(k.expires_at),
                )
                for k in found
            ],
        ),
    )


@keys.command("revoke")
@click.argument("key_id")
@command
@click.pass_context
def keys_revoke(ctx: click.Context, key_id: str) -> None:
    """Revoke the API key KEY_ID (at once and for good)."""
    key = open_treasury(ctx).admin.revoke_api_key(key_id)
    emit(ctx, key.to_json(), lambda: [f"Revoked {key.id} at {when(key.revoked_at)}"])


@click.group()
def audit() -> None:
    """The audit log."""


@audit.command("verify")
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file written by `treasury audit checkpoint`: each chain must still reach it.",
)
@command
@click.pass_context
def audit_verify(ctx: click.Context, checkpoint_file: Path | None) -> None:
    """Check every organization's audit chain; exit 1 naming the first broken link."""
    entries = None
    if checkpoint_file is not None:
        try:
            entries = checkpoints.parse(checkpoint_file.read_text())
        except ValueError as error:
            fail(ctx, f"{checkpoint_file}: {error}", {"problem": str(error)})
    checked, broken = open_treasury(ctx).verify_audit_log(entries)
    if broken is not None:
        fail(
            ctx,
            f"audit chain broken: {broken}",
            {
                "organizationId": broken.org_id,
                "sequence": broken.seq,
                "eventId": broken.event_id,
                "problem": broken.problem,
            },
        )
    emit(
        ctx,
        {"ok": True, "events": checked},
        lambda: [f"audit log intact: {checked} event(s) checked"],
    )


@audit.command("checkpoint")
@click.option("--org", "org_id", metavar="ID", help="Only this organization's chain.")
@command
@click.pass_context
def audit_checkpoint(ctx: click.Context, org_id: str | None) -> None:
    """Print a signed checkpoint of every chain, as JSON: keep it outside the database."""
    entries = open_treasury(ctx).audit_checkpoint(org_id)
    click.echo(json.dumps({"data": entries}, indent=2, ensure_ascii=False))


@audit.command("public-key")
@command
@click.pass_context
def audit_public_key(ctx: click.Context) -> None:
    """Print the Ed25519 public key (base64) that checks checkpoints' signatures."""
    key = open_treasury(ctx).audit_public_key()
    emit(ctx, {"publicKey": key}, lambda: [key])
