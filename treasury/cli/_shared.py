"""What every command of the ``treasury`` CLI uses: the treasury of the invocation, output
(one JSON document under ``--json``), errors, formatting."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import re
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import click

from .._infra.jobs import RunSummary
from .._infra.plugins import redacted, scheme_of
from .._treasury import Treasury
from ..admin import ApiKey, CreatedApiKey
from ..backends.chain._ledger import LedgerInUse
from ..backends.chain.base import ChainConfig
from ..config import Settings
from ..errors import TreasuryError

__all__ = ["redacted"]  # re-exported for the commands (it lives with the backend URLs)

DEFAULT_CONFIG = "treasury.toml"
log = logging.getLogger("treasury")


@dataclass
class State:
    """What the group's options leave for its commands."""

    config: Path | None = None
    storage: str | None = None
    json: bool = False


class _EchoHandler(logging.Handler):
    """Log records to the current stderr (click resolves it at each call)."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"treasury: {self.format(record)}", err=True)


def setup_logging() -> None:
    if not any(isinstance(h, _EchoHandler) for h in log.handlers):
        log.addHandler(_EchoHandler())
    log.setLevel(logging.INFO)


# -- the treasury of the invocation, output, errors ----------------------------------------


def load_settings(ctx: click.Context) -> Settings:
    """The settings of this invocation: defaults < TOML file < TREASURY_* < --storage."""
    state = ctx.find_object(State) or State()
    config = state.config
    if config is None and Path(DEFAULT_CONFIG).is_file():
        config = Path(DEFAULT_CONFIG)
    try:
        return Settings.load({"storage": state.storage}, toml_file=config)
    except (OSError, ValueError) as error:  # tomllib.TOMLDecodeError is a ValueError
        where = f" in {config}" if config else ""
        raise TreasuryError(f"invalid configuration{where}: {error}") from None


def open_treasury(ctx: click.Context) -> Treasury:
    """The Treasury of this invocation, closed when the command ends."""
    return ctx.with_resource(Treasury.open(settings=load_settings(ctx)))


def in_process_chains(settings: Settings) -> list[int]:
    """Chains that live inside one process (``devnet://``): no other process sees them."""
    return [
        chain_id
        for chain_id, spec in settings.chains.items()
        if scheme_of(ChainConfig.parse(chain_id, spec).url) == "devnet"
    ]


def emit(ctx: click.Context, data: Any, human: Callable[[], Iterable[str]]) -> None:
    """`data` as one JSON document under --json, else the lines of `human()`."""
    state = ctx.find_object(State)
    if state is not None and state.json:
        click.echo(json.dumps(data, indent=2))
    else:
        for line in human():
            click.echo(line)


def fail(ctx: click.Context, message: str, details: Any = None) -> NoReturn:
    state = ctx.find_object(State)
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


def command(f: Callable[..., None]) -> Callable[..., None]:
    """Add --json to a command and turn TreasuryError into a message and exit code 1."""

    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
    @functools.wraps(f)
    def wrapper(*args: Any, as_json: bool, **kwargs: Any) -> None:
        ctx = click.get_current_context()
        ctx.ensure_object(State).json = as_json
        try:
            f(*args, **kwargs)
        except TreasuryError as error:
            fail(ctx, error.message, error.details)
        except LedgerInUse as error:
            fail(ctx, devnet_in_use(str(error)))

    return wrapper


def devnets_in_memory(t: Treasury) -> list[int]:
    """The in-process devnets of `t` kept in memory while its store lasts (a PostgreSQL
    store, or SQLite with the devnet given no file): each ends with its process, the
    store does not, so a restart meets a fresh chain beside the old records."""
    if t.settings.storage.startswith("sqlite:///:memory:"):
        return []  # store and chain end together
    return [c for c in in_process_chains(t.settings) if _state_path(t, c) is None]


def _state_path(t: Treasury, chain_id: int) -> object:
    return getattr(t.chain(chain_id), "state_path", None)


def devnet_in_memory(chain_id: int) -> str:
    """What `serve` says of a devnet that will not outlive it (`devnets_in_memory`)."""
    return (
        f"chain {chain_id} is an in-process devnet kept in memory: it is reset when this"
        " process stops, while the store keeps its transfers and deposits (after a restart"
        " balances read 0 and the contracts are new). Keep it in a file: in treasury.toml"
        f' [chains] {chain_id} = "devnet:///treasury.chain" (or'
        f" TREASURY_CHAINS={chain_id}=devnet:///treasury.chain), or run `treasury devnet`"
        " and give its URL"
    )


def devnet_in_use(reason: str) -> str:
    """Why a command that needs the store's in-process devnet cannot open it: another
    process (the `serve` or `worker` of this store) holds it."""
    found = re.search(r"the devnet in (\S+) is open", reason)
    where = f" ({found.group(1)})" if found else ""
    return (
        f"the in-process devnet of this store{where} is in use by another process: the"
        " `treasury serve` (or `treasury worker`) running on this store holds it, and it"
        " serves one process at a time. That process's jobs snapshot balances and publish"
        " yield periods on every pass; `treasury yield periods --json` and `yield show"
        " PERIOD --json` read what it published without the chain. To run this command"
        " here, stop that process first (or run the chain apart with `treasury devnet` and"
        " configure its URL, so that several processes share it)"
    )


# -- formatting ---------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return ["(none)"]
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]


def when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def key_status(key: ApiKey, now: datetime) -> str:
    if key.revoked_at is not None:
        return "revoked"
    if key.expires_at is not None and key.expires_at <= now:
        return "expired"
    return "active"


def secret_lines(key: CreatedApiKey) -> list[str]:
    return [
        f"API key {key.id} for organization {key.organization_id} (user {key.user_id},"
        f" scopes {','.join(key.scopes)},"
        f" expires {when(key.expires_at) if key.expires_at else 'never'})",
        "",
        f"    {key.secret}",
        "",
        "Store this secret now: it is shown only this once and cannot be shown again.",
    ]


def parse_expiry(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 date or date-time") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def summary_json(summary: RunSummary) -> dict[str, Any]:
    return dataclasses.asdict(summary)


@contextmanager
def stop_on_sigterm(stop: Callable[[], object]) -> Iterator[None]:
    """Call `stop` on SIGTERM while inside (main thread only); restore the handler after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: stop())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
