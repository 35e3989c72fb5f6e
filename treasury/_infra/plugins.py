"""Backends chosen by URL scheme through entry points, read lazily on first lookup."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..errors import TreasuryError
from .imports import call_locked, install_hint

GROUPS = {
    "storage": "treasury.storage",
    "chain": "treasury.chain",
    "fiat": "treasury.fiat",
    "custody": "treasury.custody",
}

_INSTALL_HINTS: dict[tuple[str, str], str] = {  # (group, scheme) -> how to install it
    ("storage", "postgresql"): "install the extra: pip install 'treasury-api[postgres]'",
}

B = TypeVar("B")


class PluginNotFound(TreasuryError):
    """No installed backend answers a URL's scheme."""


def scheme_of(url: str) -> str:
    scheme = urlsplit(url).scheme
    if not scheme:
        raise PluginNotFound(f"backend URL {url!r} has no scheme (e.g. sqlite:///treasury.db)")
    return scheme.lower()


def redacted(url: str) -> str:
    """A backend URL without its password, fit to print or log."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def backend_class(group: str, url: str) -> type[Any]:
    """The class registered under `url`'s scheme in the entry-point group."""
    scheme = scheme_of(url)
    found = entry_points(group=GROUPS[group])
    for ep in found:
        if ep.name == scheme:
            try:
                return call_locked(ep.load)  # type: ignore[no-any-return]
            except ImportError as error:  # an extra not installed
                what = f"the {group} backend {scheme!r}"
                raise PluginNotFound(install_hint(error, what)) from error
    known = ", ".join(sorted(ep.name for ep in found)) or "none"
    hint = _INSTALL_HINTS.get((group, scheme))
    message = f"no {group} backend for scheme {scheme!r} (installed: {known})"
    raise PluginNotFound(f"{message}; {hint}" if hint else message)


def checked_class(group: str, url: str, base: type[B]) -> type[B]:
    """`backend_class`, refusing an entry point that is not a subclass of `base`."""
    cls = backend_class(group, url)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise PluginNotFound(f"{group} entry point for {url!r} is not a {base.__name__}")
    return cls


def resolve(group: str, spec: B | str, base: type[B]) -> B:
    """An instance passed in wins; a URL is opened by its backend's `from_url`."""
    if isinstance(spec, base):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"{group} must be a URL or a {base.__name__}, not {type(spec).__name__}")
    return checked_class(group, spec, base).from_url(spec)  # type: ignore[attr-defined,no-any-return]
