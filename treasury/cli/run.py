"""Run the service: ``serve`` (the /v1 API), ``worker`` (background jobs), ``devnet``
(a local anvil node with our contracts)."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from pathlib import Path
from typing import Any

import click

from .._infra.jobs import BackgroundWorker, RunSummary
from .._infra.plugins import scheme_of
from .._infra.validation import parse_input
from .._treasury import Treasury
from ..backends.chain.base import ChainConfig
from ..backends.chain.minting import MintingChain
from ..test_helpers import Faucet
from ._shared import (
    DEFAULT_CONFIG,
    State,
    command,
    devnet_in_memory,
    devnets_in_memory,
    emit,
    fail,
    in_process_chains,
    load_settings,
    log,
    open_treasury,
    stop_on_sigterm,
    summary_json,
)

_INTERVAL = click.option(
    "--interval",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0),
    metavar="SECONDS",
    help="Pause between passes of the background jobs.",
)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--threads",
    default=8,
    show_default=True,
    type=click.IntRange(1),
    help="Request threads (per process).",
)
@click.option(
    "--processes",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Serve from N processes with gunicorn; they share rate limits through Redis.",
)
@click.option(
    "--connection-limit",
    default=1000,
    show_default=True,
    type=click.IntRange(1),
    help="Open connections at most (idle ones count too); when full, a new connection"
    " closes the least recently active idle one.",
)
@click.option(
    "--channel-timeout",
    default=30,
    show_default=True,
    type=click.IntRange(1),
    metavar="SECONDS",
    help="Close a connection idle (or sending nothing) this long.",
)
@click.option(
    "--trusted-proxy",
    metavar="ADDRESS",
    help="A reverse proxy whose X-Forwarded-For names the client (rate limits by address).",
)
@click.option(
    "--worker/--no-worker",
    default=True,
    show_default=True,
    help="Run the background jobs in this process (a pass every --interval seconds).",
)
@_INTERVAL
@command
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    threads: int,
    processes: int,
    connection_limit: int,
    channel_timeout: int,
    trusted_proxy: str | None,
    worker: bool,
    interval: float,
) -> None:
    """Serve the /v1 API with waitress (needs the `http` extra), and run the background
    jobs in a thread, so that transactions confirm with nothing else started. With
    --processes N, gunicorn serves from N processes, each running the jobs too."""
    try:
        from ..http import create_app
        from ..http._server import create_server
    except ImportError as error:
        fail(ctx, f"{error}; install the server with: pip install 'treasury-api[http]'")
    if processes > 1:
        _serve_processes(
            ctx,
            host,
            port,
            threads,
            processes,
            connection_limit,
            channel_timeout,
            trusted_proxy,
            interval if worker else None,
        )
        return
    t = open_treasury(ctx)
    proxy: dict[str, Any] = {}
    if trusted_proxy:
        proxy = {
            "trusted_proxy": trusted_proxy,
            "trusted_proxy_headers": {"x-forwarded-for"},
            "clear_untrusted_proxy_headers": True,
        }
    try:
        server: Any = create_server(
            create_app(t),
            host=host,
            port=port,
            threads=threads,
            connection_limit=connection_limit,
            channel_timeout=channel_timeout,
            max_body_bytes=t.settings.max_body_bytes,
            send_timeout=t.settings.send_timeout_s,
            **proxy,
        )
    except OSError as error:  # port in use, unknown host, no permission
        fail(ctx, f"cannot listen on {host}:{port}: {error.strerror or error}")
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{getattr(server, 'effective_port', port)}/v1"
    emit(ctx, {"url": url}, lambda: [f"Serving the treasury API on {url} (Ctrl+C to stop)"])
    for chain_id in devnets_in_memory(t):
        log.warning("warning: %s", devnet_in_memory(chain_id))
    if worker:
        log.info("jobs: a pass every %gs in this process", interval)
    else:
        log.info("jobs: none in this process (--no-worker): run `treasury worker` beside it")
    jobs = t.run_in_background(interval, _log_pass) if worker else None
    try:
        with stop_on_sigterm(lambda: sys.exit(0)):
            server.run()  # returns after Ctrl+C or SIGTERM
    finally:
        if jobs is not None:
            jobs.stop()


def _serve_processes(
    ctx: click.Context,
    host: str,
    port: int,
    threads: int,
    processes: int,
    connection_limit: int,
    channel_timeout: int,
    trusted_proxy: str | None,
    jobs_every: float | None,
) -> None:
    """`serve --processes N`: refuse what one process cannot share, check the settings by
    opening the treasury once (migrations included) before forking, then run gunicorn."""
    try:
        from ._processes import Processes
    except ImportError as error:
        fail(ctx, f"{error}; install the server with: pip install 'treasury-api[http]'")
    settings = load_settings(ctx)
    if in_process := in_process_chains(settings):
        fail(
            ctx,
            f"chain {in_process[0]} is an in-process devnet (devnet://), which other"
            " processes cannot reach: start `treasury devnet` and configure its URL",
        )
    if scheme_of(settings.rate_limit_storage) == "memory":
        fail(
            ctx,
            "--processes needs rate limits shared between the processes:"
            " set rate_limit_storage (TREASURY_RATE_LIMIT_STORAGE) to redis://…",
        )
    if scheme_of(settings.storage) == "sqlite" and ":memory:" in settings.storage:
        fail(ctx, "--processes needs a database every process opens: not sqlite:///:memory:")
    if scheme_of(settings.fiat) == "sandbox":
        log.warning(
            "the sandbox fiat provider keeps its state in each process: a fiat"
            " transfer is advanced only by the process that made it"
        )
    Treasury.open(settings=settings).close()  # bad settings fail here, once; schema current
    shown = f"[{host}]" if ":" in host else host

    def ready(arbiter: Any) -> None:
        bound = arbiter.LISTENERS[0].sock.getsockname()[1]
        url = f"http://{shown}:{bound}/v1"
        emit(
            ctx,
            {"url": url, "processes": processes},
            lambda: [f"Serving the treasury API on {url} from {processes} processes"],
        )

    Processes(
        settings,
        {
            "bind": f"{shown}:{port}",
            "workers": processes,
            "worker_class": "gthread",
            "threads": threads,
            "worker_connections": connection_limit,
            "keepalive": channel_timeout,
            "timeout": max(channel_timeout, 30),
            "when_ready": ready,
            "accesslog": None,
            "control_socket_disable": True,  # one per user by default: servers would collide
        },
        jobs_every=jobs_every,
        on_pass=_log_pass,
        trusted_proxy=trusted_proxy,
    ).run()


@click.command()
@_INTERVAL
@click.option("--once", is_flag=True, help="Run one pass and exit.")
@command
@click.pass_context
def worker(ctx: click.Context, interval: float, once: bool) -> None:
    """Run the background jobs (t.run_once()) in a loop, logging each pass."""
    t = open_treasury(ctx)
    if in_process := in_process_chains(t.settings):
        fail(
            ctx,
            f"chain {in_process[0]} is an in-process devnet (devnet://): it lives inside one"
            " process, and a separate worker would get another chain. `treasury serve` runs"
            " the jobs itself; to share one chain between processes, start `treasury devnet`",
        )
    if scheme_of(t.settings.fiat) == "sandbox":
        log.warning(
            "the sandbox fiat provider keeps its transfers in the process that made them:"
            " this worker cannot advance fiat transfers made by `treasury serve`"
        )
    state = ctx.ensure_object(State)

    def report(summary: RunSummary) -> None:
        if state.json:
            click.echo(json.dumps(summary_json(summary)))
        else:
            _log_pass(summary)

    if once:
        summary = t.run_once()
        if state.json:
            report(summary)
        else:
            _log_pass(summary, always=True)
        if summary.errors:  # scripts and cron see a failed pass
            ctx.exit(1)
        return
    log.info("worker started: a pass every %gs (Ctrl+C to stop)", interval)
    loop = BackgroundWorker(t.run_once, interval, report)
    with stop_on_sigterm(loop.stop), contextlib.suppress(KeyboardInterrupt):
        loop.run()
    log.info("worker stopped")


def _log_pass(summary: RunSummary, *, always: bool = False) -> None:
    """A log line for a pass that did something (failures and standing conditions are
    logged by the jobs, once each until they change); `always` for `worker --once`."""
    work = [f"{name}={n}" for name, n in summary.work.items()]
    if work or always:
        errors = [f"errors={len(summary.errors)}"] if summary.errors or always else []
        log.info("jobs pass: %s", ", ".join([*work, *errors]))


@click.command()
@click.argument("address")
@click.argument("amount")
@click.argument("token", type=click.Choice(["USDC", "USDT", "c0", "ETH"], case_sensitive=False))
@click.option("--chain", "chain_id", default=31337, show_default=True, type=click.IntRange(1))
@command
@click.pass_context
def faucet(ctx: click.Context, address: str, amount: str, token: str, chain_id: int) -> None:
    """Send AMOUNT of TOKEN to ADDRESS on a chain that can mint (one `treasury devnet`
    started; the in-process devnet of another process cannot be reached from here)."""
    t = open_treasury(ctx)
    spec = t.settings.chains.get(chain_id)
    if spec is not None and scheme_of(ChainConfig.parse(chain_id, spec).url) == "devnet":
        fail(
            ctx,
            "the in-process devnet lives inside the process that serves it: use"
            " POST /v1/test-helpers/{chainId}/faucet on that server, or start `treasury devnet`",
        )
    symbol = {s.lower(): s for s in ("USDC", "USDT", "c0", "ETH")}[token.lower()]
    request = parse_input(Faucet, None, {"address": address, "token": symbol, "amount": amount})
    chain = t.chain(chain_id)
    if not isinstance(chain, MintingChain):
        fail(ctx, f"chain {chain_id} cannot mint: it has no test helpers")
    tx_hash = chain.faucet(request.address, request.token, request.amount)
    shown = {"chainId": chain_id, **request.model_dump(), "transactionHash": tx_hash}
    emit(ctx, shown, lambda: [f"Sent {amount} {symbol} to {request.address} ({tx_hash})"])


@click.command()
@click.option("--port", default=8545, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--block-time",
    type=click.FloatRange(0, min_open=True),
    help="Seconds per block (default: instant).",
)
@click.option(
    "--write/--no-write",
    default=True,
    show_default=True,
    help="Write the chain into the config file (--config, else treasury.toml).",
)
@click.option(
    "--c0-decimals",
    type=int,
    help="Decimals of the c0 deployed, 6 to 18 (default: 18).",
)
@command
@click.pass_context
def devnet(
    ctx: click.Context, port: int, block_time: float | None, write: bool, c0_decimals: int | None
) -> None:
    """Run anvil on loopback with our contracts, for `serve`, workers and outside wallets."""
    from ..anvil import CHAIN_ID, deploy_contracts, start_anvil
    from ..backends.chain._deploy import check_c0_decimals
    from ..config import write_chain

    state = ctx.ensure_object(State)
    if c0_decimals is not None:
        try:
            check_c0_decimals(c0_decimals)
        except ValueError as error:
            fail(ctx, str(error))
    try:
        node = ctx.with_resource(start_anvil(port=port, block_time=block_time))
    except OSError as error:  # anvil missing, port in use
        fail(ctx, str(error))
    config = deploy_contracts(node.url, c0_decimals)
    path = state.config or Path(DEFAULT_CONFIG)
    if write:
        write_chain(path, CHAIN_ID, config)
    public = {k: v for k, v in config.items() if k != "minter_key"}  # a key: never printed
    shown = {"chainId": CHAIN_ID, **public, "config": str(path) if write else None}
    emit(
        ctx,
        shown,
        lambda: [
            f"anvil on {node.url} (chain {CHAIN_ID}); contracts:",
            *(f"  {name:<20} {at}" for name, at in config["addresses"].items()),
            f"chain written to {path}" if write else "config not written (--no-write)",
            "Ctrl+C to stop",
        ],
    )
    stop = threading.Event()
    with stop_on_sigterm(stop.set):
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
