"""Where a webhook may go: outward only.

An endpoint whose host is, or resolves to, an address that is not globally routable (loopback,
link-local such as the cloud metadata address 169.254.169.254, private, unspecified, shared,
multicast, reserved, site-local, 192.0.0.0/24, and the translation prefixes that carry an IPv4
address: NAT64, 6to4, Teredo, IPv4-compatible) is refused, unless it falls in a network that
`WEBHOOK_ALLOWED_NETWORKS` names (`DETECTIVE_WEBHOOK_ALLOWED_NETWORKS`: an on-premises
receiver, the tests' loopback receiver). Without this a ping reached the site's own admin,
the model server and PostgreSQL's port, and stored their answers.

The check runs twice: when an endpoint is saved (the model's validation) and before every
delivery, on the addresses the name resolves to then (DNS can change). The delivery connects to
the very address that was checked, so a second lookup cannot swap it (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]


class TargetRefused(ValueError):
    """The URL points at an address a webhook may not reach. The message says why."""


class Unresolved(TargetRefused):
    """The host name does not resolve (now)."""


@dataclass(frozen=True)
class Target:
    """A checked destination: the URL's host name and the address to connect to."""

    host: str
    port: int
    address: IPAddress


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


# Tests replace this to make a name resolve where they want.
resolver: Resolver = system_resolver


def allowed_networks() -> list[IPNetwork]:
    return [
        ipaddress.ip_network(network, strict=False)
        for network in getattr(settings, "WEBHOOK_ALLOWED_NETWORKS", ())
    ]


def _plain(address: IPAddress) -> IPAddress:
    # ::ffff:127.0.0.1 is 127.0.0.1 to the kernel.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


# Ranges `ipaddress`' flags let through (Python 3.11 calls some of them global), refused by
# name: the translation prefixes carry an IPv4 address a gateway may route inward, and the
# others are special-purpose (RFC 6890, issue 37).
SPECIAL_RANGES: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(network), kind)
    for network, kind in (
        ("64:ff9b::/96", "NAT64 translation"),
        ("64:ff9b:1::/48", "NAT64 translation"),
        ("2002::/16", "6to4"),
        ("2001::/32", "Teredo"),
        ("::/96", "IPv4-compatible"),
        ("fec0::/10", "site-local"),
        ("192.0.0.0/24", "IETF protocol assignments"),
    )
)


def kind_of(address: IPAddress) -> str | None:
    """Why the address is inward ("loopback", "private" ...), or None for a public one."""
    address = _plain(address)
    for network, kind in SPECIAL_RANGES:
        if (
            address.version == network.version
            and address in network
            and not (address.is_unspecified or address.is_loopback)
        ):
            return kind
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "site-local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "not public"
    return None


def is_allowed(address: IPAddress, networks: Iterable[IPNetwork]) -> bool:
    address = _plain(address)
    return kind_of(address) is None or any(address in network for network in networks)


def _addresses(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        found = resolver(host, port)
    except (OSError, UnicodeError) as error:
        raise Unresolved(f"{host!r} does not resolve ({error})") from None
    addresses = []
    for text in found:
        # getaddrinfo gives a scoped IPv6 address as fe80::1%eth0.
        addresses.append(ipaddress.ip_address(text.split("%", 1)[0]))
    if not addresses:
        raise Unresolved(f"{host!r} does not resolve")
    return addresses


def check(url: str, networks: Sequence[IPNetwork] | None = None) -> Target:
    """The address a delivery to `url` connects to, when every address of its host is
    outward (or allowed); otherwise TargetRefused naming the address and why."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetRefused("use an http:// or https:// URL with a host")
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise TargetRefused("the URL's port is not a number from 0 to 65535") from None
    networks = allowed_networks() if networks is None else networks
    addresses = _addresses(host, port)
    for address in addresses:
        if not is_allowed(address, networks):
            named = host if host == str(address) else f"{host} ({address})"
            raise TargetRefused(
                f"{named} is a {kind_of(address)} address: webhooks go outward only "
                "(an on-premises receiver's network can be allowed with "
                "DETECTIVE_WEBHOOK_ALLOWED_NETWORKS)"
            )
    return Target(host=host, port=port, address=addresses[0])
