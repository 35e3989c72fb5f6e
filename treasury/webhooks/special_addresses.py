"""The IANA IPv4 and IPv6 Special-Purpose Address Registries, as a table.

Each entry is a block with its name, the RFC that reserves it and the registry's
"Globally Reachable" column: ``False`` (never a webhook target), ``True`` (a more
specific block that is reachable inside a block that is not, e.g. the PCP anycast
address 192.0.0.9 in 192.0.0.0/24), or ``None`` where the registry says N/A because the
block carries IPv4 addresses (6to4, Teredo, NAT64): those are judged by what they carry
(`targets.embedded_ipv4`). An address takes the answer of the most specific entry that
holds it. The standard library's `is_global` is not used: Python 3.11 calls 192.0.0.0/24
global. Sources: https://www.iana.org/assignments/iana-ipv4-special-registry and
https://www.iana.org/assignments/iana-ipv6-special-registry (as of 2025), plus the
multicast blocks (their own registries), which are never a target either.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network


@dataclass(frozen=True)
class Entry:
    network: IPv4Network | IPv6Network
    name: str
    rfc: str
    globally_reachable: bool | None  # None: N/A, judged by the IPv4 address it carries

    def __str__(self) -> str:
        return f"{self.network}, {self.name}, {self.rfc}"


def _entry(block: str, name: str, rfc: str, reachable: bool | None) -> Entry:
    return Entry(ip_network(block), name, rfc, reachable)


IPV4: tuple[Entry, ...] = (
    _entry("0.0.0.0/8", '"This network"', "RFC 791", False),
    _entry("0.0.0.0/32", '"This host on this network"', "RFC 1122", False),
    _entry("10.0.0.0/8", "Private-Use", "RFC 1918", False),
    _entry("100.64.0.0/10", "Shared Address Space", "RFC 6598", False),
    _entry("127.0.0.0/8", "Loopback", "RFC 1122", False),
    _entry("169.254.0.0/16", "Link Local", "RFC 3927", False),
    _entry("172.16.0.0/12", "Private-Use", "RFC 1918", False),
    _entry("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890", False),
    _entry("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335", False),
    _entry("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", False),
    _entry("192.0.0.9/32", "Port Control Protocol Anycast", "RFC 7723", True),
    _entry("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC 8155", True),
    _entry("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC 8880", False),
    _entry("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC 8880", False),
    _entry("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737", False),
    _entry("192.31.196.0/24", "AS112-v4", "RFC 7535", True),
    _entry("192.52.193.0/24", "AMT", "RFC 7450", True),
    _entry("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526", False),
    _entry("192.168.0.0/16", "Private-Use", "RFC 1918", False),
    _entry("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC 7534", True),
    _entry("198.18.0.0/15", "Benchmarking", "RFC 2544", False),
    _entry("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737", False),
    _entry("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737", False),
    _entry("240.0.0.0/4", "Reserved", "RFC 1112", False),
    _entry("255.255.255.255/32", "Limited Broadcast", "RFC 919", False),
    _entry("224.0.0.0/4", "Multicast", "RFC 5771", False),  # the multicast registry
)

IPV6: tuple[Entry, ...] = (
    _entry("::1/128", "Loopback Address", "RFC 4291", False),
    _entry("::/128", "Unspecified Address", "RFC 4291", False),
    _entry("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291", False),
    _entry("64:ff9b::/96", "IPv4-IPv6 Translat.", "RFC 6052", None),
    _entry("64:ff9b:1::/48", "IPv4-IPv6 Translat.", "RFC 8215", False),
    _entry("100::/64", "Discard-Only Address Block", "RFC 6666", False),
    _entry("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780", False),
    _entry("2001::/23", "IETF Protocol Assignments", "RFC 2928", False),
    _entry("2001::/32", "TEREDO", "RFC 4380", None),
    _entry("2001:1::1/128", "Port Control Protocol Anycast", "RFC 7723", True),
    _entry("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC 8155", True),
    _entry("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", True),
    _entry("2001:2::/48", "Benchmarking", "RFC 5180", False),
    _entry("2001:3::/32", "AMT", "RFC 7450", True),
    _entry("2001:4:112::/48", "AS112-v6", "RFC 7535", True),
    _entry("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843", False),
    _entry("2001:20::/28", "ORCHIDv2", "RFC 7343", True),
    _entry("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", True),
    _entry("2001:db8::/32", "Documentation", "RFC 3849", False),
    _entry("2002::/16", "6to4", "RFC 3056", None),
    _entry("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC 7534", True),
    _entry("3fff::/20", "Documentation", "RFC 9637", False),
    _entry("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602", False),
    _entry("fc00::/7", "Unique-Local", "RFC 4193", False),
    _entry("fe80::/10", "Link-Local Unicast", "RFC 4291", False),
    _entry("ff00::/8", "Multicast", "RFC 4291", False),  # the multicast registry
)

#: Where IPv6 unicast addresses are allocated (RFC 4291): outside it and the entries
#: above, an IPv6 address is unallocated (or deprecated site-local, fec0::/10).
GLOBAL_UNICAST = IPv6Network("2000::/3")


def entry_of(address: IPv4Address | IPv6Address) -> Entry | None:
    """The most specific registry entry holding `address` (None when none does)."""
    table = IPV4 if isinstance(address, IPv4Address) else IPV6
    holding = [entry for entry in table if address in entry.network]
    return max(holding, key=lambda entry: entry.network.prefixlen, default=None)
