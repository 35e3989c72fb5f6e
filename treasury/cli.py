"""The ``treasury`` command line: set up a database, manage keys, serve /v1, run the worker.

Every command takes ``--json`` (one JSON document on stdout); errors go to stderr with
exit code 1, as ``{"error": ...}`` under ``--json``. Secrets are printed once, on creation.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import click

from ._service import RunSummary, Treasury
from .config import Settings
from .errors import TreasuryError
from .models.admin import ApiKey, CreatedApiKey, Organization

DEFAULT_CONFIG = "treasury.toml"
log = logging.getLogger("treasury")


@dataclass
class _State:
    """What the group's options leave for its commands."""

    config: Path | None = None
    storage: str | None = None
    json: bool = False


class _EchoHandler(logging.Handler):
    """Log records to the current stderr (click resolves it at each call)."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"treasury: {self.format(record)}", err=True)


def _setup_logging() -> None:
    if not any(isinstance(h, _EchoHandler) for h in log.handlers):
        log.addHandler(_EchoHandler())
    log.setLevel(logging.INFO)


# -- the two helpers every command uses ---------------------------------------------------


def _open(ctx: click.Context) -> Treasury:
    """The Treasury of this invocation: defaults < TOML file < TREASURY_* < --storage."""
    state = ctx.find_object(_State) or _State()
    config = state.config
    if config is None and Path(DEFAULT_CONFIG).is_file():
        config = Path(DEFAULT_CONFIG)
    try:
        settings = Settings.load({"storage": state.storage}, toml_file=config)
    except (OSError, ValueError) as error:  # tomllib.TOMLDecodeError is a ValueError
        where = f" in {config}" if config else ""
        raise TreasuryError(f"invalid configuration{where}: {error}") from None
    return ctx.with_resource(Treasury.open(settings=settings))


def _emit(ctx: click.Context, data: Any, human: Callable[[], Iterable[str]]) -> None:
    """`data` as one JSON document under --json, else the lines of `human()`."""
    state = ctx.find_object(_State)
    if state is not None and state.json:
        click.echo(json.dumps(data, indent=2))
    else:
        for line in human():
            click.echo(line)


def _fail(ctx: click.Context, message: str, details: Any = None) -> NoReturn:
    state = ctx.find_object(_State)
    if state is not None and state.json:
        body: dict[str, Any] = {"error": message}
        if details is not None:
            body["details"] = details
        click.echo(json.dumps(body), err=True)
    else:
        problems = details.get("fields", []) if isinstance(details, dict) else []
        extra = "".join(
            f"; {p.get('field') or p.get('location')}: {p.get('message')}" for p in problems
        )
        click.echo(f"Error: {message}{extra}", err=True)
    ctx.exit(1)


def _command(f: Callable[..., None]) -> Callable[..., None]:
    """Add --json to a command and turn TreasuryError into a message and exit code 1."""

    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
    @functools.wraps(f)
    def wrapper(*args: Any, as_json: bool, **kwargs: Any) -> None:
        ctx = click.get_current_context()
        ctx.ensure_object(_State).json = as_json
        try:
            f(*args, **kwargs)
        except TreasuryError as error:
            _fail(ctx, error.message, error.details)

    return wrapper


# -- formatting ---------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return ["(none)"]
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _status(key: ApiKey, now: datetime) -> str:
    if key.revoked_at is not None:
        return "revoked"
    if key.expires_at is not None and key.expires_at <= now:
        return "expired"
    return "active"


def _redacted(url: str) -> str:
    """A storage URL without its password, fit to print."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _secret_lines(key: CreatedApiKey) -> list[str]:
    return [
        f"API key {key.id} for organization {key.organization_id} (user {key.user_id},"
        f" expires {_when(key.expires_at) if key.expires_at else 'never'})",
        "",
        f"    {key.secret}",
        "",
        "Store this secret now: it is shown only this once and cannot be shown again.",
    ]


def _parse_expiry(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 date or date-time") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _summary(summary: RunSummary) -> dict[str, Any]:
    return dataclasses.asdict(summary)


# -- commands -----------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="TREASURY_CONFIG",
    help=f"TOML settings file [default: ./{DEFAULT_CONFIG} if present].",
)
@click.option(
    "--storage", metavar="URL", help="Storage URL; overrides the config and TREASURY_STORAGE."
)
@click.version_option(package_name="treasury")
@click.pass_context
def main(ctx: click.Context, config: Path | None, storage: str | None) -> None:
    """An embeddable treasury API: set it up, manage API keys, serve /v1, run the worker."""
    ctx.obj = _State(config=config, storage=storage)
    _setup_logging()


@main.command()
@click.option(
    "--org-name", default="My organization", show_default=True, help="First organization."
)
@click.option("--user-id", default="admin", show_default=True, help="User the first key acts as.")
@click.option("--force", is_flag=True, help="Add another organization if some already exist.")
@_command
@click.pass_context
def init(ctx: click.Context, org_name: str, user_id: str, force: bool) -> None:
    """Create the database, its first organization and first API key."""
    t = _open(ctx)
    existing = t.admin.list_organizations()
    if existing and not force:
        _fail(
            ctx,
            f"already initialized ({len(existing)} organization(s) in"
            f" {_redacted(t.settings.storage)}); use --force to add another organization,"
            " or `treasury keys create ORG_ID` for a new key",
        )
    org = t.admin.create_organization(org_name)
    key = t.admin.create_api_key(org.id, user_id=user_id)
    _emit(
        ctx,
        {"organization": org.to_json(), "apiKey": key.to_json()},
        lambda: [
            f"Initialized {_redacted(t.settings.storage)}",
            f"Organization {org.id} ({org.name})",
            *_secret_lines(key),
        ],
    )


@main.group()
def orgs() -> None:
    """Organizations."""


@orgs.command("create")
@click.argument("name")
@_command
@click.pass_context
def orgs_create(ctx: click.Context, name: str) -> None:
    """Create an organization named NAME."""
    org = _open(ctx).admin.create_organization(name)
    _emit(ctx, org.to_json(), lambda: [f"Organization {org.id} ({org.name})"])


@orgs.command("list")
@_command
@click.pass_context
def orgs_list(ctx: click.Context) -> None:
    """List organizations, oldest first."""
    found: list[Organization] = _open(ctx).admin.list_organizations()
    _emit(
        ctx,
        {"data": [o.to_json() for o in found], "count": len(found)},
        lambda: _table(
            ("ID", "NAME", "CREATED"), [(o.id, o.name, _when(o.created_at)) for o in found]
        ),
    )


@main.group()
def keys() -> None:
    """API keys (secrets are shown once, on creation)."""


@keys.command("create")
@click.argument("org_id")
@click.option("--user-id", default="admin", show_default=True, help="User the key acts as.")
@click.option(
    "--expires-at",
    metavar="ISO8601",
    callback=_parse_expiry,
    help="Expiry, e.g. 2030-01-01T00:00:00Z (UTC if no offset) [default: never].",
)
@_command
@click.pass_context
def keys_create(ctx: click.Context, org_id: str, user_id: str, expires_at: datetime | None) -> None:
    """Create an API key for organization ORG_ID and print its secret once."""
    key = _open(ctx).admin.create_api_key(org_id, user_id=user_id, expires_at=expires_at)
    _emit(ctx, key.to_json(), lambda: _secret_lines(key))


@keys.command("list")
@click.option("--org", "org_id", metavar="ORG_ID", help="Only this organization's keys.")
@_command
@click.pass_context
def keys_list(ctx: click.Context, org_id: str | None) -> None:
    """List API keys, oldest first (never their secrets)."""
    t = _open(ctx)
    if org_id is not None:
        t.admin.get_organization(org_id)
    found = t.admin.list_api_keys(org_id)
    now = t.now()
    _emit(
        ctx,
        {"data": [k.to_json() for k in found], "count": len(found)},
        lambda: _table(
            ("ID", "ORGANIZATION", "USER", "STATUS", "CREATED", "EXPIRES"),
            [
                (
                    k.id,
                    k.organization_id,
                    k.user_id,
                    _status(k, now),
                    _when(k.created_at),
                    _when(k.expires_at),
                )
                for k in found
            ],
        ),
    )


@keys.command("revoke")
@click.argument("key_id")
@_command
@click.pass_context
def keys_revoke(ctx: click.Context, key_id: str) -> None:
    """Revoke the API key KEY_ID (at once and for good)."""
    key = _open(ctx).admin.revoke_api_key(key_id)
    _emit(ctx, key.to_json(), lambda: [f"Revoked {key.id} at {_when(key.revoked_at)}"])


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--threads", default=8, show_default=True, type=click.IntRange(1), help="Worker threads."
)
@_command
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, threads: int) -> None:
    """Serve the /v1 API with waitress (needs the `http` extra)."""
    try:
        import waitress.server

        from .http import create_app
    except ImportError as error:
        _fail(ctx, f"{error}; install the server with: pip install 'treasury[http]'")
    t = _open(ctx)
    try:
        server: Any = waitress.server.create_server(
            create_app(t), host=host, port=port, threads=threads
        )
    except OSError as error:  # port in use, unknown host, no permission
        _fail(ctx, f"cannot listen on {host}:{port}: {error.strerror or error}")
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{getattr(server, 'effective_port', port)}/v1"
    _emit(ctx, {"url": url}, lambda: [f"Serving the treasury API on {url} (Ctrl+C to stop)"])
    with _stop_on_sigterm(lambda: sys.exit(0)):
        server.run()  # returns after Ctrl+C or SIGTERM


@main.command()
@click.option(
    "--interval",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0),
    metavar="SECONDS",
    help="Pause between passes.",
)
@click.option("--once", is_flag=True, help="Run one pass and exit.")
@_command
@click.pass_context
def worker(ctx: click.Context, interval: float, once: bool) -> None:
    """Run background work (t.run_once()) in a loop, logging each pass."""
    t = _open(ctx)
    state = ctx.ensure_object(_State)
    stop = threading.Event()

    def one_pass() -> None:
        summary = _summary(t.run_once())
        if state.json:
            click.echo(json.dumps(summary))
        else:
            shown = ", ".join(  # failures themselves are logged by run_once
                f"{k}={len(v) if isinstance(v, dict) else v}" for k, v in summary.items()
            )
            log.info("worker pass: %s", shown)

    if once:
        one_pass()
        return
    log.info("worker started: a pass every %gs (Ctrl+C to stop)", interval)
    with _stop_on_sigterm(stop.set):
        try:
            while not stop.is_set():
                try:
                    one_pass()
                except Exception as error:  # e.g. an upstream outage: retry next pass
                    message = error.message if isinstance(error, TreasuryError) else repr(error)
                    log.error("worker pass failed: %s", message)
                stop.wait(interval)
        except KeyboardInterrupt:
            pass
    log.info("worker stopped")


@main.command()
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
@_command
@click.pass_context
def devnet(ctx: click.Context, port: int, block_time: float | None, write: bool) -> None:
    """Run anvil on loopback with our contracts, for `serve`, workers and outside wallets."""
    from .config import write_chain
    from .devnet_node import CHAIN_ID, deploy_contracts, start_anvil

    state = ctx.ensure_object(_State)
    try:
        node = ctx.with_resource(start_anvil(port=port, block_time=block_time))
    except OSError as error:  # anvil missing, port in use
        _fail(ctx, str(error))
    config = deploy_contracts(node.url)
    path = state.config or Path(DEFAULT_CONFIG)
    if write:
        write_chain(path, CHAIN_ID, config)
    shown = {"chainId": CHAIN_ID, **config, "config": str(path) if write else None}
    _emit(
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
    with _stop_on_sigterm(stop.set):
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass


@contextmanager
def _stop_on_sigterm(stop: Callable[[], object]) -> Iterator[None]:
    """Call `stop` on SIGTERM while inside (main thread only); restore the handler after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: stop())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    main(prog_name="treasury")
