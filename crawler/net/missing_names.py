"""Names that do not exist are looked up once, not once a link.

A site that links to many pages of a host whose name does not resolve (a
typo, a retired domain, a CI runner with no DNS for the outside world) paid a
lookup for each of those links, each taking a thread of the event loop's
small pool for as long as the resolver takes to say no: the links waited for
one another. The connection pool's cache of names keeps only answers that succeeded.

``MissingNames`` wraps the crawl's resolver and remembers the hosts whose
lookup said the name does not exist (``EAI_NONAME``, ``EAI_NODATA``) for
``ttl_s``, as a resolver's negative cache would; later lookups of such a host
fail at once with the same error, so the report reads the same. A temporary
failure (``EAI_AGAIN``: no answer from the DNS server) is asked again: a
moment's outage must not mark every later link of the host broken.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from crawler.net.resolver import Address, Resolver

# Seconds a missing name is remembered: the connection pool keeps answers as long.
MISSING_TTL_S = 300.0
# Hosts remembered at most; the memo is emptied when full (a crawl meeting this
# many missing names is rare, and forgetting only costs lookups).
MAX_MISSING = 10_000

_NO_SUCH_NAME = frozenset(
    code
    for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if code is not None
)


class MissingNames:
    """Resolves through ``inner``; a name found missing fails at once for ``ttl_s``."""

    def __init__(
        self,
        inner: Resolver,
        *,
        ttl_s: float = MISSING_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inner = inner
        self._ttl_s = ttl_s
        self._clock = clock
        self._missing: dict[str, tuple[int, str, float]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[Address]:
        key = host.lower().rstrip(".")
        known = self._missing.get(key)
        if known is not None:
            errno, message, until = known
            if self._clock() < until:
                raise socket.gaierror(errno, message)
            del self._missing[key]
        try:
            return await self._inner.resolve(host, port, family)
        except socket.gaierror as exc:
            if exc.errno is not None and exc.errno in _NO_SUCH_NAME:
                if len(self._missing) >= MAX_MISSING:
                    self._missing.clear()
                until = self._clock() + self._ttl_s
                self._missing[key] = (exc.errno, str(exc.strerror), until)
            raise

    async def close(self) -> None:
        await self._inner.close()
