"""The private-address guard at the network's edge: every request passes ``AddressGuard``.

``--exclude-all-private`` (the service's default) means no request reaches a
private, loopback or link-local address, whatever asked for it: a page, a
link check, a redirect hop, robots.txt, a sitemap from the settings, a
robots ``Sitemap:`` line or a nested sitemap index. ``Fetcher._request`` is
the one path every one of those takes, and it asks ``AddressGuard.check``
first:

- an IP literal (which never reaches a resolver) is classified at once;
- a name is checked by ``PublicOnlyResolver`` when it is resolved to
  connect, so the address checked is the address connected to (no window
  for DNS rebinding);
- a name sent through a proxy (``HTTP_PROXY``/``HTTPS_PROXY``) is never
  resolved here to connect, so the guard resolves it itself and refuses a
  private answer before the request is handed to the proxy. The proxy
  resolves the name again: a DNS server that answers differently the second
  time can still steer the proxy; deny private targets on the proxy too
  (README, "Proxies").

The proxy's own address is the operator's choice and is not checked.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from typing import Protocol, TypedDict

from yarl import URL

from crawler.netguard import Allowed, PrivateAddressError, ip_literal, is_private_address


class Address(TypedDict):
    """One address a name resolved to (the fields aiohttp's resolvers give too)."""

    hostname: str
    host: str
    port: int
    family: int
    proto: int
    flags: int


class Resolver(Protocol):
    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[Address]: ...

    async def close(self) -> None: ...


class SystemResolver:
    """The system's resolver (``getaddrinfo`` in the event loop's thread pool)."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[Address]:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, family=family, flags=socket.AI_ADDRCONFIG
        )
        addresses: list[Address] = []
        for found_family, _, proto, _, sockaddr in infos:
            address = str(sockaddr[0])
            if found_family == socket.AF_INET6 and len(sockaddr) > 3 and sockaddr[3]:
                address = f"{address}%{sockaddr[3]}"  # a link-local address's scope
            addresses.append(
                Address(
                    hostname=host,
                    host=address,
                    port=int(sockaddr[1]),
                    family=found_family,
                    proto=proto,
                    flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
                )
            )
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} has no address")
        return addresses

    async def close(self) -> None:
        return None


def system_resolver() -> Resolver:
    """The resolver a crawl starts from (looked up here at each call: tests replace it)."""
    return SystemResolver()


class PublicOnlyResolver:
    """Resolves as usual, then refuses names with any non-public address.

    ``exempt`` names (the configured proxies) resolve unchecked.
    """

    def __init__(self, allowed: Allowed = (), exempt: Iterable[str] = ()) -> None:
        self._inner = system_resolver()
        self._allowed = allowed
        self._exempt = frozenset(name.lower() for name in exempt)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[Address]:
        results = await self._inner.resolve(host, port, family)
        if host.lower() in self._exempt:
            return results
        for result in results:
            if is_private_address(str(result["host"]), self._allowed):
                raise PrivateAddressError(f"{host} resolves to {result['host']}, a private address")
        return results

    async def close(self) -> None:
        await self._inner.close()


class AddressGuard:
    """Refuses a request to a private address before it is sent (see the module docstring)."""

    def __init__(self, allowed: Allowed = (), proxies: Iterable[str] = ()) -> None:
        self.allowed = allowed
        self.resolver = PublicOnlyResolver(allowed, exempt=proxies)

    async def check(self, url: URL, *, via_proxy: bool) -> None:
        """Raise ``PrivateAddressError`` when ``url`` would reach a private address."""
        host = url.raw_host or ""
        literal = ip_literal(host)
        if literal is not None:
            if is_private_address(str(literal), self.allowed):
                raise PrivateAddressError(f"{host} is a private address")
        elif via_proxy:
            await self.resolver.resolve(host, url.port or 0, socket.AF_UNSPEC)
