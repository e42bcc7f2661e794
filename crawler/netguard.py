"""``--exclude-all-private``: never connect to private, loopback or link-local addresses.

Checked after DNS resolution, so a public name that points at an internal
address is caught as well as an IP literal. The resolver wraps aiohttp's own;
an IP literal never reaches a resolver, so ``scope`` checks literals itself
with ``is_private_host``.
"""

from __future__ import annotations

import ipaddress
import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

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


class PublicOnlyResolver(AbstractResolver):
    """Resolves as usual, then refuses names with any non-public address."""

    def __init__(self, allowed: Allowed = ()) -> None:
        self._inner = DefaultResolver()
        self._allowed = allowed

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        for result in results:
            if is_private_address(str(result["host"]), self._allowed):
                raise PrivateAddressError(f"{host} resolves to {result['host']}, a private address")
        return results

    async def close(self) -> None:
        await self._inner.close()
