"""Webhook target URLs: non-public addresses, however spelled, are refused at registration
(and at delivery: the IANA special-purpose registries, block by block)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

import httpx
import pytest

from treasury import Treasury
from treasury.webhooks.targets import TargetRefused, embedded_ipv4, is_public, pin

from .conftest import MASTER_KEY, make_tenant

_tenants = itertools.count()

NON_PUBLIC = "non-public"
REFUSED = [
    # IPv6 forms carrying a private IPv4 address
    ("http://[::127.0.0.1]/", NON_PUBLIC),  # IPv4-compatible
    ("http://[::ffff:127.0.0.1]/", NON_PUBLIC),  # IPv4-mapped
    ("http://[::ffff:10.0.0.1]/", NON_PUBLIC),
    ("http://[64:ff9b::a9fe:a9fe]/", NON_PUBLIC),  # NAT64 of 169.254.169.254
    ("http://[64:ff9b::7f00:1]/", NON_PUBLIC),  # NAT64 of 127.0.0.1
    ("http://[64:ff9b:1::a00:1]/", NON_PUBLIC),  # local-use NAT64 of 10.0.0.1
    ("http://[64:ff9b:1::808:808]/", NON_PUBLIC),  # local-use NAT64: never globally reachable
    ("http://[2002:7f00:1::]/", NON_PUBLIC),  # 6to4 of 127.0.0.1
    ("http://[2002:a9fe:a9fe::1]/", NON_PUBLIC),  # 6to4 of 169.254.169.254
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", NON_PUBLIC),  # Teredo, client 127.0.0.1
    ("http://[2001:0:a00:1:8000:63bf:f7f7:f7f7]/", NON_PUBLIC),  # Teredo, server 10.0.0.1
    # other spellings of IPv4 loopback and metadata addresses
    ("http://2130706433/", NON_PUBLIC),  # decimal 127.0.0.1
    ("http://0177.0.0.1/", NON_PUBLIC),  # octal
    ("http://0x7f.0.0.1/", NON_PUBLIC),  # hex
    ("http://127.1/", NON_PUBLIC),  # short form
    ("http://127.0.0.1:8080/h", NON_PUBLIC),
    ("http://169.254.169.254/latest/meta-data", NON_PUBLIC),
    ("http://10.0.0.8/h", NON_PUBLIC),
    ("http://192.168.1.1/h", NON_PUBLIC),
    ("http://100.64.0.1/", NON_PUBLIC),  # carrier-grade NAT
    ("http://0.0.0.0/", NON_PUBLIC),
    ("http://0/", NON_PUBLIC),
    ("http://224.0.0.1/", NON_PUBLIC),  # multicast
    ("http://255.255.255.255/", NON_PUBLIC),
    # IPv6
    ("http://[::1]/", NON_PUBLIC),
    ("http://[::]/", NON_PUBLIC),
    ("http://[fe80::1]/", NON_PUBLIC),  # link-local
    ("http://[fd00::1]/", NON_PUBLIC),  # unique local
    ("http://[fec0::1]/", NON_PUBLIC),  # site-local (deprecated)
    ("http://[ff02::1]/", NON_PUBLIC),  # multicast
    ("http://[ff0e::1]/", NON_PUBLIC),  # global-scope multicast
    ("http://[4000::1]/", NON_PUBLIC),  # unallocated
    # names
    ("http://localhost/", NON_PUBLIC),
    # schemes and credentials
    ("ftp://93.184.215.14/", "http or https"),
    ("file:///etc/passwd", "http or https"),
    ("gopher://93.184.215.14:70/_", "http or https"),
    ("https://user:secret@93.184.215.14/hook", "credentials"),
    ("https://user@93.184.215.14/hook", "credentials"),
]

ACCEPTED = [
    "http://93.184.215.14/",
    "https://[2606:4700:4700::1111]/hook",
    "http://[64:ff9b::808:808]/",  # NAT64 of 8.8.8.8
    "http://[2002:808:808::1]/",  # 6to4 of 8.8.8.8
]


@pytest.fixture(scope="module")
def strict_treasury(module_storage_url: str) -> Iterator[tuple[Treasury, str]]:
    """A treasury that refuses private webhook targets (the default), served over HTTP."""
    from treasury.http import create_app
    from treasury.testing.server import serve

    t = Treasury.open(module_storage_url, master_key=MASTER_KEY, allow_private_webhook_urls=False)
    with serve(create_app(t)) as url:
        yield t, url
    t.close()


@pytest.fixture
def strict_client(strict_treasury: tuple[Treasury, str]) -> Iterator[httpx.Client]:
    """A client of a fresh organization, so each test starts with no webhooks."""
    t, url = strict_treasury
    n = next(_tenants)
    tenant = make_tenant(t, f"Org {n}", f"user_{n}")
    with httpx.Client(base_url=url, headers={"x-api-key": tenant.secret}) as c:
        yield c


def _register(client: httpx.Client, url: str) -> httpx.Response:
    return client.post("/v1/webhooks", json={"url": url, "events": ["transaction.confirmed"]})


@pytest.mark.parametrize(("url", "reason"), REFUSED)
def test_non_public_targets_are_refused(strict_client, url, reason):
    r = _register(strict_client, url)
    assert r.status_code == 400, r.text
    field = r.json()["details"]["fields"][0]
    assert field["field"] == "url"
    assert reason in field["message"]
    assert strict_client.get("/v1/webhooks").json()["count"] == 0


@pytest.mark.parametrize("url", ACCEPTED)
def test_public_literal_targets_are_accepted(strict_client, url):
    r = _register(strict_client, url)
    assert r.status_code == 201, r.text
    assert r.json()["url"] == url
    assert strict_client.get("/v1/webhooks").json()["count"] == 1


def test_refusal_names_the_carried_address(strict_client):
    message = _register(strict_client, "http://[64:ff9b::a9fe:a9fe]/").json()["details"]
    assert "169.254.169.254" in message["fields"][0]["message"]


@pytest.mark.parametrize(
    ("address", "carried"),
    [
        ("::ffff:127.0.0.1", ["127.0.0.1"]),
        ("::127.0.0.1", ["127.0.0.1"]),
        ("64:ff9b::a9fe:a9fe", ["169.254.169.254"]),
        ("64:ff9b:1::a00:1", ["10.0.0.1"]),
        ("2002:7f00:1::", ["127.0.0.1"]),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", ["65.54.227.120", "127.0.0.1"]),
        ("2001:0:a00:1:8000:63bf:f7f7:f7f7", ["10.0.0.1", "8.8.8.8"]),
        ("2606:4700:4700::1111", []),
        ("fe80::1", []),
        ("127.0.0.1", []),
    ],
)
def test_embedded_ipv4(address, carried):
    assert embedded_ipv4(ip_address(address)) == [IPv4Address(a) for a in carried]


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("64:ff9b::808:808", True),
        ("2002:808:808::1", True),
        ("::ffff:8.8.8.8", False),  # IANA: ::ffff:0:0/96 is not globally reachable
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("100.64.0.1", False),
        ("169.254.169.254", False),
        ("224.0.0.1", False),
        ("0.0.0.0", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("fec0::1", False),
        ("ff02::1", False),
        ("ff0e::1", False),
        ("4000::1", False),
        ("::127.0.0.1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("::ffff:224.0.0.1", False),
        ("64:ff9b::a9fe:a9fe", False),
        ("64:ff9b::7f00:1", False),
        ("64:ff9b::e000:1", False),  # NAT64 of multicast 224.0.0.1
        ("64:ff9b:1::a00:1", False),
        ("64:ff9b:1::808:808", False),
        ("2002:7f00:1::", False),
        ("2002:a9fe:a9fe::1", False),
        ("2002:e000:1::1", False),  # 6to4 of multicast
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),
        ("2001:0:a00:1:8000:63bf:f7f7:f7f7", False),
    ],
)
def test_is_public(address, public):
    assert is_public(ip_address(address)) is public


# The IANA special-purpose registries' blocks that are not globally reachable, copied
# here from https://www.iana.org/assignments/iana-ipv4-special-registry and
# .../iana-ipv6-special-registry: each is refused at registration and at delivery.
IANA_NOT_GLOBAL = [
    "0.0.0.0/8",
    "0.0.0.0/32",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.0.0/29",
    "192.0.0.8/32",
    "192.0.0.170/32",
    "192.0.0.171/32",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "240.0.0.0/4",
    "255.255.255.255/32",
    "::1/128",
    "::/128",
    "::ffff:0:0/96",
    "64:ff9b:1::/48",
    "100::/64",
    "100:0:0:1::/64",
    "2001::/23",
    "2001:2::/48",
    "2001:10::/28",
    "2001:db8::/32",
    "3fff::/20",
    "5f00::/16",
    "fc00::/7",
    "fe80::/10",
]
IANA_GLOBAL_INSIDE_THOSE = [
    "192.0.0.9",
    "192.0.0.10",
    "2001:1::1",
    "2001:1::2",
    "2001:1::3",
    "2001:3::1",
    "2001:4:112::1",
    "2001:20::1",
    "2001:30::1",
]


def _literal(address: IPv4Address | IPv6Address) -> str:
    return f"[{address}]" if address.version == 6 else str(address)


def test_the_module_holds_exactly_the_registries_unreachable_blocks():
    from treasury.webhooks import special_addresses

    held = {
        str(entry.network)
        for entry in (*special_addresses.IPV4, *special_addresses.IPV6)
        if entry.globally_reachable is False and entry.name != "Multicast"
    }
    assert held == {str(ip_network(block)) for block in IANA_NOT_GLOBAL}
    for entry in (*special_addresses.IPV4, *special_addresses.IPV6):
        assert entry.rfc.startswith("RFC "), entry


@pytest.mark.parametrize("block", IANA_NOT_GLOBAL)
def test_every_unreachable_registry_block_is_refused_at_registration_and_delivery(
    strict_client, block
):
    network = ip_network(block)
    addresses = {network[0], network[-1], network[network.num_addresses // 2]}
    if block == "192.0.0.0/24":
        addresses.add(ip_address("192.0.0.192"))  # a cloud metadata address found accepted
    for address in addresses:
        url = f"http://{_literal(address)}/hook"
        r = _register(strict_client, url)
        assert r.status_code == 400, (url, r.text)
        message = r.json()["details"]["fields"][0]["message"]
        assert "non-public" in message and str(address) in message, message
        assert "allow_private_webhook_urls" in message, message
        assert "TREASURY_ALLOW_PRIVATE_WEBHOOK_URLS" in message, message
        with pytest.raises(TargetRefused, match="allow_private_webhook_urls"):
            pin(url, allow_private=False)  # what each delivery attempt runs first
    assert strict_client.get("/v1/webhooks").json()["count"] == 0


def test_a_refusal_names_the_registry_block_and_its_rfc(strict_client):
    message = _register(strict_client, "http://192.0.0.192/").json()["details"]["fields"][0]
    assert "192.0.0.0/24, IETF Protocol Assignments, RFC 6890" in message["message"]


@pytest.mark.parametrize("address", IANA_GLOBAL_INSIDE_THOSE)
def test_reachable_blocks_inside_unreachable_ones_are_public(address):
    assert is_public(ip_address(address))
