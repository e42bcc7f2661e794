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


class PrivateAddressError(OSError):
    """A target resolved to an address the crawl may not reach."""


def is_private_address(address: str) -> bool:
    """Private, loopback, link-local, reserved, multicast or unspecified."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


def is_private_host(host: str) -> bool:
    """Is this authority an IP literal that is not public? (Names go to the resolver.)"""
    name = host
    if name.startswith("["):
        name = name[1 : name.find("]")]
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    return is_private_address(name)


class PublicOnlyResolver(AbstractResolver):
    """Resolves as usual, then refuses names with any non-public address."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        for result in results:
            if is_private_address(str(result["host"])):
                raise PrivateAddressError(f"{host} resolves to {result['host']}, a private address")
        return results

    async def close(self) -> None:
        await self._inner.close()
