"""Yield distributions from the shell: ``treasury yield periods | show | publish``."""

from __future__ import annotations

import click

from .._infra.models import ListOf
from .._treasury import Treasury
from ..money import to_units
from ._shared import (
    command,
    devnets_in_memory,
    emit,
    fail,
    in_process_chains,
    open_treasury,
    table,
    when,
)


def c0(t: Treasury, chain_id: int, raw: str) -> str:
    """Raw c0 of a chain (as the API shows it) in token units, for the tables people read."""
    return to_units(raw, t.decimals(chain_id, "c0"))


PUBLISHING = ("snapshot_yields", "publish_yield_periods")


@click.group(name="yield")
def yield_() -> None:
    """Yield distributions: published periods, their claims, publishing now."""


@yield_.command()
@command
@click.pass_context
def periods(ctx: click.Context) -> None:
    """Published periods of every chain, newest first."""
    t = open_treasury(ctx)
    listed = t.yield_artifacts.list()
    assert isinstance(listed, ListOf)  # without a period id: the list

    def rows() -> list[list[str]]:  # token units need the chain; --json (raw) does not
        return [
            [
                p.period_id,
                str(p.chain_id),
                when(p.starts_at),
                str(p.count),
                c0(t, p.chain_id, p.total),
                p.root,
            ]
            for p in listed.data
        ]

    emit(
        ctx,
        listed.to_json(),
        lambda: table(["PERIOD", "CHAIN", "STARTS", "CLAIMS", "TOTAL (c0)", "ROOT"], rows()),
    )


@yield_.command()
@click.argument("period_id")
@click.option("--chain", "chain_id", type=click.IntRange(1), help="Default: the primary chain.")
@command
@click.pass_context
def show(ctx: click.Context, period_id: str, chain_id: int | None) -> None:
    """One published period: its root and every claim (index, account, amount)."""
    t = open_treasury(ctx)
    period = t.yield_artifacts.get(period_id, chain_id)

    def lines() -> list[str]:  # token units need the chain; --json (raw) does not
        units = t.decimals(period.chain_id, "c0")
        rows = [
            [str(leaf.index), leaf.account, to_units(leaf.amount, units)] for leaf in period.leaves
        ]
        return [
            f"Period {period.period_id} on chain {period.chain_id}:"
            f" {when(period.starts_at)} to {when(period.ends_at)}",
            f"Root {period.root}, {period.count} claims, {to_units(period.total, units)} c0",
            *table(["INDEX", "ACCOUNT", "AMOUNT (c0)"], rows),
        ]

    emit(ctx, period.to_json(), lines)


@yield_.command()
@click.option(
    "--period-now",
    is_flag=True,
    help="Close the current period now and publish it: a trial, on a chain that can mint.",
)
@click.option("--chain", "chain_id", type=click.IntRange(1), help="Default: the primary chain.")
@command
@click.pass_context
def publish(ctx: click.Context, period_now: bool, chain_id: int | None) -> None:
    """Take a snapshot if one is due and publish every ended period now (what each pass
    of `serve` or `worker` does); say why when nothing was published. --period-now
    closes the current period at once (a trial on a test chain; it stays closed)."""
    t = open_treasury(ctx)
    for in_process in in_process_chains(t.settings):  # held by a `serve` of this store?
        if chain_id in (None, in_process):
            t.chain(in_process)  # LedgerInUse: said plainly (`command`), nothing attempted
    for apart in devnets_in_memory(t):
        if chain_id in (None, apart) and not period_now:
            click.echo(
                f"warning: chain {apart} is an in-process devnet kept in memory: this command"
                " snapshots a chain of its own, not the one a `treasury serve` runs (whose"
                " jobs snapshot and publish on every pass). Keep the devnet in a file"
                f' (treasury.toml [chains] {apart} = "devnet:///treasury.chain") or run'
                " `treasury devnet` and give its URL, to publish from here",
                err=True,
            )
    if period_now:
        _publish_now(ctx, t, chain_id)
        return
    summary = t.run_once(only=PUBLISHING)
    published = summary["yield_periods_published"]
    chains = [chain_id] if chain_id is not None else sorted(t.settings.chains)
    reasons = [t.why_no_yield_period(c) for c in chains] if not published else []
    data = {"counts": summary.counts, "errors": summary.errors, "reasons": reasons}
    emit(
        ctx,
        data,
        lambda: [
            f"snapshots taken: {summary['yield_snapshots']}, periods published: {published}",
            *reasons,
            *(f"error: {where}: {message}" for where, message in summary.errors.items()),
        ],
    )
    if summary.errors:
        ctx.exit(1)


def _publish_now(ctx: click.Context, t: Treasury, chain_id: int | None) -> None:
    target = chain_id or t.settings.primary_chain or min(t.settings.chains, default=None)
    if (
        target in in_process_chains(t.settings)
        and getattr(t.chain(target), "state_path", None) is None
    ):
        fail(
            ctx,
            "this devnet lives in memory, inside the process that serves it: close the period"
            " there (t.close_yield_period() in Python), keep the devnet in a file (a SQLite"
            " store, or devnet:///path), or start `treasury devnet` and configure its URL",
        )
    period = t.close_yield_period(chain_id)
    if period is None:
        emit(
            ctx,
            {"published": None},
            lambda: [
                "the current period is closed; no holder earned anything in it, so nothing is"
                " listed (hold c0 in a wallet of an organization, then try again next period)"
            ],
        )
        return
    emit(
        ctx,
        {"published": period.to_json()},
        lambda: [
            f"Period {period.period_id} on chain {period.chain_id} closed at {when(period.ends_at)}"
            f" and published: {period.count} claims, {c0(t, period.chain_id, period.total)} c0,"
            f" root {period.root}"
        ],
    )
