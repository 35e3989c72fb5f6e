"""Which URLs a webhook may target: http(s) to public addresses, names resolved.

An address is public when the IANA special-purpose registries (`special_addresses`,
a table with each block's RFC) do not call it unreachable, it is not multicast, an
IPv6 one is in allocated unicast space (2000::/3, so not site-local `fec0::/10`), and
every IPv4 address it carries is public too. IPv6 has several forms that carry an IPv4
address, and a connection to one of them can end up at that IPv4 address (through the
kernel, a NAT64 gateway or a tunnel relay), so `embedded_ipv4` looks through them all:
IPv4-mapped, IPv4-compatible, NAT64 (well-known and local-use), 6to4 and Teredo.

`check_target` runs at registration; delivery resolves the host again, keeps only
addresses for which `is_public` holds and connects to one of those (no DNS rebinding).
A refusal names the setting that lifts it.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, IPv6Network, ip_address
from urllib.parse import urlsplit, urlunsplit

from ..errors import ValidationError
from .special_addresses import GLOBAL_UNICAST, entry_of

ALLOWING_SETTING = "allow_private_webhook_urls (TREASURY_ALLOW_PRIVATE_WEBHOOK_URLS)"

_COMPATIBLE = IPv6Network("::/96")  # IPv4-compatible ::a.b.c.d (deprecated, RFC 4291)
_NAT64 = IPv6Network("64:ff9b::/96")  # well-known NAT64 prefix (RFC 6052)
_LOCAL_NAT64 = IPv6Network("64:ff9b:1::/48")  # local-use NAT64 prefix (RFC 8215)


def embedded_ipv4(address: IPv4Address | IPv6Address) -> list[IPv4Address]:
    """The IPv4 addresses an IPv6 address carries: IPv4-mapped `::ffff:a.b.c.d`,
    IPv4-compatible `::a.b.c.d`, NAT64 (`64:ff9b::/96`, and the last 32 bits within the
    local-use `64:ff9b:1::/48`), 6to4 (`2002::/16`) and Teredo (`2001::/32`: server and
    client). Empty for an IPv4 address or an IPv6 address of no such form."""
    if isinstance(address, IPv4Address):
        return []
    found = [] if address.ipv4_mapped is None else [address.ipv4_mapped]
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if any(address in prefix for prefix in (_COMPATIBLE, _NAT64, _LOCAL_NAT64)):
        found.append(IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def is_public(address: IPv4Address | IPv6Address) -> bool:
    """Whether a webhook may connect to this (already resolved) address."""
    entry = entry_of(address)
    if address.is_multicast or (entry is not None and entry.globally_reachable is False):
        return False
    if isinstance(address, IPv6Address) and entry is None and address not in GLOBAL_UNICAST:
        return False  # unallocated, or deprecated site-local
    return all(is_public(ip) for ip in embedded_ipv4(address))


def _refuse(message: str) -> ValidationError:
    return ValidationError.field("body", "url", message)


def check_target(url: str, *, allow_private: bool) -> None:
    """Raise a 400 unless `url` is http(s) and every address its host resolves to is public.

    Non-public addresses (see `is_public`) are refused unless `allow_private` (tests, local
    development). Called at registration; delivery checks again (`pin`) before each
    attempt, since DNS answers change.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise _refuse("must be an http or https URL")
    if not parts.hostname:
        raise _refuse("must name a host")
    if parts.username or parts.password:
        raise _refuse("must not carry credentials")
    try:
        port = parts.port
    except ValueError:
        raise _refuse("has an invalid port") from None
    if allow_private:
        return
    try:
        addresses = resolve(parts.hostname, port or 443)
    except OSError:
        raise _refuse("host does not resolve") from None
    for address in addresses:
        if not is_public(address):
            raise _refuse(
                f"resolves to a non-public address ({_shown(address)});"
                f" set {ALLOWING_SETTING} to allow private targets"
            )


def resolve(host: str, port: int) -> list[IPv4Address | IPv6Address]:
    """Every address `host` resolves to (`OSError` when it does not)."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except UnicodeError as error:
        raise OSError(str(error)) from None
    return list(dict.fromkeys(ip_address(str(info[4][0]).split("%")[0]) for info in infos))


@dataclass(frozen=True)
class Pinned:
    """Where one delivery connects: the checked address in the URL, the name in `host`
    (the Host header) and `sni` (the TLS server name, None for plain http)."""

    url: str
    host: str
    sni: str | None

    @property
    def path(self) -> str:
        """The request target: the URL's path and query."""
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class TargetRefused(Exception):
    """A target that must not be contacted now (it resolves to a non-public address)."""


def pin(url: str, *, allow_private: bool) -> Pinned:
    """Resolve the target again and pin the connection to an address checked now, so a
    DNS answer that changed since registration (rebinding) cannot reach a private one."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    default = 443 if parts.scheme == "https" else 80
    port = parts.port or default
    authority = parts.netloc.rsplit("@", 1)[-1]
    if allow_private:
        return Pinned(url, authority, host if parts.scheme == "https" else None)
    addresses = resolve(host, port)
    refused = [a for a in addresses if not is_public(a)]
    if refused or not addresses:
        shown = ", ".join(_shown(a) for a in refused) or "nothing"
        raise TargetRefused(
            f"{host} resolves to a non-public address ({shown}); set {ALLOWING_SETTING}"
        )
    literal = f"[{addresses[0]}]" if addresses[0].version == 6 else str(addresses[0])
    pinned = parts._replace(netloc=f"{literal}:{port}")
    return Pinned(urlunsplit(pinned), authority, host if parts.scheme == "https" else None)


def _shown(address: IPv4Address | IPv6Address) -> str:
    """The address, the registry block that holds it, and what it carries."""
    entry = entry_of(address)
    block = f" in {entry}" if entry is not None else ""
    carried = "".join(f", carrying {_shown(ip)}" for ip in embedded_ipv4(address))
    return f"{address}{block}{carried}"
