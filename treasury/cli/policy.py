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
@click.option(
    "--destination-cooldown-hours",
    type=click.IntRange(0, 87_600),
    metavar="HOURS",
    help="Hours a recipient or tracked wallet waits before it is a known destination.",
)
@click.option(
    "--gas-station",
    metavar="WALLET_ID",
    help=f"The id of the managed wallet that pays gas ({OFF}: none).",
)
@command
@click.pass_context
def policy_set(
    ctx: click.Context,
    org_id: str,
    approval_threshold: str | None,
    daily_limit: str | None,
    destinations: str | None,
    destination_cooldown_hours: int | None,
    gas_station: str | None,
) -> None:
    """Change the policy of organization ORG_ID: the options given, the rest as it is."""
    org = open_treasury(ctx).for_organization(org_id, user_id="admin")
    now = org.policy.get()
    changed = org.policy.put(
        approval_threshold=_given(approval_threshold, now.approval_threshold),
        daily_limit=_given(daily_limit, now.daily_limit),
        destinations=destinations or now.destinations,
        destination_cooldown_hours=(
            now.destination_cooldown_hours
            if destination_cooldown_hours is None
            else destination_cooldown_hours
        ),
        gas_station=_station(gas_station, now.gas_station),
    )
    emit(ctx, changed.to_json(), lambda: _lines(changed))


def _given(value: str | None, current: str | None) -> str | None:
    if value is None:
        return current
    return None if value == OFF else value


def _station(value: str | None, current: int | None) -> int | None:
    if value is None:
        return current
    if value == OFF:
        return None
    if not value.isascii() or not value.isdigit():
        raise click.BadParameter(f"a wallet id or {OFF}", param_hint="--gas-station")
    return int(value)


def _lines(found: Policy) -> list[str]:
    return [
        f"approval threshold  {found.approval_threshold or OFF}",
        f"daily limit         {found.daily_limit or OFF}",
        f"destinations        {found.destinations}",
        f"cooldown (hours)    {found.destination_cooldown_hours}",
        f"gas station         {OFF if found.gas_station is None else found.gas_station}",
    ]
