"""Yield distributions from the shell: ``treasury yield periods | show | publish``."""

from __future__ import annotations

import click

from .._infra.models import ListOf
from ._shared import command, emit, open_treasury, table, when

PUBLISHING = ("snapshot_yields", "publish_yield_periods")


@click.group(name="yield")
def yield_() -> None:
    """Yield distributions: published periods, their claims, publishing now."""


@yield_.command()
@command
@click.pass_context
def periods(ctx: click.Context) -> None:
    """Published periods of every chain, newest first."""
    listed = open_treasury(ctx).yield_artifacts.list()
    assert isinstance(listed, ListOf)  # without a period id: the list
    rows = [
        [p.period_id, str(p.chain_id), when(p.starts_at), str(p.count), p.total, p.root]
        for p in listed.data
    ]
    emit(
        ctx,
        listed.to_json(),
        lambda: table(["PERIOD", "CHAIN", "STARTS", "CLAIMS", "TOTAL (raw c0)", "ROOT"], rows),
    )


@yield_.command()
@click.argument("period_id")
@click.option("--chain", "chain_id", type=click.IntRange(1), help="Default: the primary chain.")
@command
@click.pass_context
def show(ctx: click.Context, period_id: str, chain_id: int | None) -> None:
    """One published period: its root and every claim (index, account, amount)."""
    period = open_treasury(ctx).yield_artifacts.get(period_id, chain_id)
    rows = [[str(leaf.index), leaf.account, leaf.amount] for leaf in period.leaves]
    emit(
        ctx,
        period.to_json(),
        lambda: [
            f"Period {period.period_id} on chain {period.chain_id}:"
            f" {when(period.starts_at)} to {when(period.ends_at)}",
            f"Root {period.root}, {period.count} claims, {period.total} raw c0",
            *table(["INDEX", "ACCOUNT", "AMOUNT (raw c0)"], rows),
        ],
    )


@yield_.command()
@command
@click.pass_context
def publish(ctx: click.Context) -> None:
    """Take a snapshot if one is due and publish every ended period now (what each pass
    of `serve` or `worker` does)."""
    summary = open_treasury(ctx).run_once(only=PUBLISHING)
    data = {"counts": summary.counts, "errors": summary.errors}
    emit(
        ctx,
        data,
        lambda: [
            f"snapshots taken: {summary['yield_snapshots']},"
            f" periods published: {summary['yield_periods_published']}",
            *(f"error: {where}: {message}" for where, message in summary.errors.items()),
        ],
    )
    if summary.errors:
        ctx.exit(1)
