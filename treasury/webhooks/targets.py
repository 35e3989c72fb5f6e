"""Which URLs a webhook may target: http(s) to public addresses, names resolved."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from ..errors import ValidationError


def _refuse(message: str) -> ValidationError:
    return ValidationError.field("body", "url", message)


def check_target(url: str, *, allow_private: bool) -> None:
    """Raise a 400 unless `url` is http(s) and every address its host resolves to is public.

    Private, loopback, link-local, multicast, reserved and unspecified addresses are
    refused, unless `allow_private` (tests, local development). Called at registration;
    delivery must call it again before each attempt, since DNS answers change.
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
        infos = socket.getaddrinfo(parts.hostname, port or 443, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        raise _refuse("host does not resolve") from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not address.is_global or address.is_multicast:
            raise _refuse(f"resolves to a non-public address ({address})")
