"""The resolver for ``--exclude-all-private``: aiohttp's, refusing private addresses."""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from crawler.netguard import Allowed, PrivateAddressError, is_private_address


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
