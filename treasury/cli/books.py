"""The books from the shell: ``reconcile`` (a run now, its breaks) and ``statement`` (a
wallet's entries, as a table, JSON or CSV); DESIGN §3 "The books"."""

from __future__ import annotations

import csv
import io
from typing import Any

import click

from ..books import Break, ReconciliationRun, Statement
from ._shared import command, emit, open_treasury, table


@click.command("reconcile")
@click.argument("org_id")
@click.option(
    "--chain", "chain_id", type=int, metavar="CHAIN_ID", help="Default: the primary chain."
)
@command
@click.pass_context
def reconcile(ctx: click.Context, org_id: str, chain_id: int | None) -> None:
    """Reconcile organization ORG_ID's books with the chain now, at one height: exit 0
    when every (wallet, token) ties out, 1 when not (its open breaks listed)."""
    org = open_treasury(ctx).for_organization(org_id, user_id="admin")
    run = org.reconciliation.run(chainId=chain_id)
    opened = org.reconciliation.get().open
    body = {"run": run.to_json(), "open": [b.to_json() for b in opened]}
    emit(ctx, body, lambda: _run_lines(run, opened))
    if not run.tied_out or opened:
        ctx.exit(1)


@click.command("statement")
@click.argument("org_id")
@click.argument("wallet")
@click.argument("token", type=click.Choice(["USDC", "USDT", "c0"]))
@click.option("--from", "start", metavar="TIME", help="ISO 8601; default: the beginning.")
@click.option("--to", "end", metavar="TIME", help="ISO 8601, excluded; default: now.")
@click.option(
    "--chain", "chain_id", type=int, metavar="CHAIN_ID", help="Default: the primary chain."
)
@click.option("--csv", "as_csv", is_flag=True, help="Print the statement as CSV.")
@command
@click.pass_context
def statement(
    ctx: click.Context,
    org_id: str,
    wallet: str,
    token: str,
    start: str | None,
    end: str | None,
    chain_id: int | None,
    as_csv: bool,
) -> None:
    """Print WALLET's statement in TOKEN for organization ORG_ID: opening, every entry with
    the balance after it, closing (opening + the amounts = closing)."""
    org = open_treasury(ctx).for_organization(org_id, user_id="admin")
    query: dict[str, Any] = {"wallet": wallet, "token": token, "from": start, "to": end}
    query["chainId"] = chain_id
    given = {k: v for k, v in query.items() if v is not None}
    if as_csv:
        from ..books.models import STATEMENT_CSV

        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(STATEMENT_CSV.columns)
        for chunk in org.statements.csv_chunks(given):
            writer.writerows(STATEMENT_CSV.cells(line) for line in chunk)
        click.echo(out.getvalue(), nl=False)
        return
    found = org.statements.get(given)
    emit(ctx, found.to_json(), lambda: _statement_lines(found))


def _run_lines(run: ReconciliationRun, opened: list[Break]) -> list[str]:
    verdict = "tied out" if run.tied_out else "does not tie out"
    lines = [
        f"chain {run.chain_id} at block {run.block_number}: {verdict}"
        f" ({run.pairs_tied_out} of {run.pairs} pairs; {run.in_flight} in flight)"
    ]
    if opened:
        lines.append("open breaks:")
        lines += table(
            ["id", "kind", "wallet", "token", "expected", "actual", "difference", "block"],
            [
                [
                    str(b.id),
                    b.kind,
                    b.wallet,
                    b.token,
                    b.expected,
                    b.actual,
                    b.difference,
                    str(b.block_number),
                ]
                for b in opened
            ],
        )
    return lines


def _statement_lines(found: Statement) -> list[str]:
    lines = [f"{found.wallet} {found.token} on chain {found.chain_id}", f"opening {found.opening}"]
    lines += table(
        ["at", "kind", "amount", "balance", "reference"],
        [
            [
                e.at.isoformat(),
                e.kind,
                e.amount,
                e.balance,
                e.transfer_id or e.deposit_id or e.transaction_hash or "",
            ]
            for e in found.entries
        ],
    )
    lines.append(f"closing {found.closing}")
    return lines
