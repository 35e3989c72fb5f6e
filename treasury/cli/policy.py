"""An organization's policy: ``policy show`` and ``policy set`` (DESIGN §3 Controls)."""

from __future__ import annotations

import click

from ..policy import Policy
from ._shared import command, emit, open_treasury

OFF = "off"  # the value that turns a control off


@click.group()
def policy() -> None:
    """The policy of an organization: approval threshold, daily limit, destinations."""


@policy.command("show")
@click.argument("org_id")
@command
@click.pass_context
def policy_show(ctx: click.Context, org_id: str) -> None:
    """Show the policy of organization ORG_ID."""
    found = open_treasury(ctx).for_organization(org_id, user_id="admin").policy.get()
    emit(ctx, found.to_json(), lambda: _lines(found))


@policy.command("set")
@click.argument("org_id")
@click.option(
    "--approval-threshold",
    metavar="DOLLARS",
    help=f"Transfers at or above it await approval ({OFF}: none).",
)
@click.option(
    "--daily-limit",
    metavar="DOLLARS",
    help=f"Dollars accepted per trailing 24 hours ({OFF}: none).",
)
@click.option(
    "--destinations",
    type=click.Choice(["any", "known"]),
    help="known: only the organization's wallets and saved recipients.",
)
@command
@click.pass_context
def policy_set(
    ctx: click.Context,
    org_id: str,
    approval_threshold: str | None,
    daily_limit: str | None,
    destinations: str | None,
) -> None:
    """Change the policy of organization ORG_ID: the options given, the rest as it is."""
    org = open_treasury(ctx).for_organization(org_id, user_id="admin")
    now = org.policy.get()
    changed = org.policy.put(
        approval_threshold=_given(approval_threshold, now.approval_threshold),
        daily_limit=_given(daily_limit, now.daily_limit),
        destinations=destinations or now.destinations,
    )
    emit(ctx, changed.to_json(), lambda: _lines(changed))


def _given(value: str | None, current: str | None) -> str | None:
    if value is None:
        return current
    return None if value == OFF else value


def _lines(found: Policy) -> list[str]:
    return [
        f"approval threshold  {found.approval_threshold or OFF}",
        f"daily limit         {found.daily_limit or OFF}",
        f"destinations        {found.destinations}",
    ]
