"""``--exclude-all-private``: never connect to private, loopback or link-local addresses.

Checked after DNS resolution, so a public name that points at an internal
address is caught as well as an IP literal: ``crawler.resolver`` wraps
aiohttp's resolver with these checks; an IP literal never reaches a resolver,
so ``scope`` checks literals itself with ``is_private_host``. No aiohttp
here: the parse helpers import this module.
"""

from __future__ import annotations

import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Allowed = tuple[Network, ...]


class PrivateAddressError(OSError):
    """A target resolved to an address the crawl may not reach."""


def parse_networks(entries: list[str]) -> Allowed:
    """``--allow-network`` values ("10.1.0.0/16", "192.168.1.7") as networks."""
    return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in entries)


def is_private_address(address: str, allowed: Allowed = ()) -> bool:
    """Not public (private, shared, loopback, link-local, reserved, multicast,
    unspecified) and not in an allowed network."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if any(ip in network for network in allowed):
        return False
    return bool(
        not ip.is_global
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


def is_private_host(host: str, allowed: Allowed = ()) -> bool:
    """Is this authority an IP literal that is not public? (Names go to the resolver.)"""
    name = host
    if name.startswith("["):
        name = name[1 : name.find("]")]
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    return is_private_address(name, allowed)
