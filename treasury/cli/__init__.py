"""The ``treasury`` command line: set up a database, manage keys, serve /v1, run the worker.

Every command takes ``--json`` (one JSON document on stdout); errors go to stderr with
exit code 1, as ``{"error": ...}`` under ``--json``. Secrets are printed once, on creation.
"""

from __future__ import annotations

import pathlib

import click

from . import _shared, admin, books, demo, policy, run, yields

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=pathlib.Path),
    envvar="TREASURY_CONFIG",
    help=f"TOML settings file [default: ./{_shared.DEFAULT_CONFIG} if present].",
)
@click.option(
    "--storage", metavar="URL", help="Storage URL; overrides the config and TREASURY_STORAGE."
)
@click.version_option(package_name="treasury-api")
@click.pass_context
def main(ctx: click.Context, config: pathlib.Path | None, storage: str | None) -> None:
    """An embeddable treasury API: set it up, manage API keys, serve /v1, run the worker."""
    ctx.obj = _shared.State(config=config, storage=storage)
    _shared.setup_logging()


for _command in (
    admin.init,
    admin.orgs,
    admin.keys,
    admin.audit,
    policy.policy,
    books.reconcile,
    books.statement,
    run.serve,
    run.worker,
    run.devnet,
    run.faucet,
    yields.yield_,
    demo.demo,
):
    main.add_command(_command)
