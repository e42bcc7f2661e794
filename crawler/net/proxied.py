"""aiohttp, for what the crawl's own client leaves to it: requests through a proxy.

Imported when the first request goes through ``HTTP_PROXY``/``HTTPS_PROXY``
(and by the service's webhooks): a crawl without a proxy never imports
aiohttp's client, which was a fifth of a one-page check's start-up. The
session is set up as the crawl's own connections are: no redirects followed,
the crawl's resolver (the private-address guard and the memo of missing
names; the proxy's own name is exempt), its cookie jar, one total timeout.
"""

from __future__ import annotations

import socket

from crawler.config import CrawlSettings
from crawler.errors import FailureKind
from crawler.net.aio_client import aiohttp
from crawler.net.resolver import Resolver


class AiohttpResolver(aiohttp.abc.AbstractResolver):
    """One of the crawl's resolvers, as aiohttp's connector asks for it."""

    def __init__(self, inner: Resolver) -> None:
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        return await self._inner.resolve(host, port, family)

    async def close(self) -> None:
        return None  # the crawl's resolver is closed by its owner


def open_session(
    settings: CrawlSettings, resolver: Resolver, jar: aiohttp.abc.AbstractCookieJar | None
) -> aiohttp.ClientSession:
    """The session a proxied request goes through."""
    connector = aiohttp.TCPConnector(
        limit=settings.max_concurrency,
        limit_per_host=0,
        ttl_dns_cache=300,
        ssl=not settings.insecure,
        resolver=AiohttpResolver(resolver),
    )
    return aiohttp.ClientSession(
        connector=connector,
        headers={"User-Agent": settings.user_agent, **settings.headers},
        timeout=aiohttp.ClientTimeout(total=settings.timeout_s),
        cookie_jar=jar if jar is not None else aiohttp.DummyCookieJar(),
        auto_decompress=True,
        # trust_env would also read ~/.netrc on every request, in a thread:
        # proxies are taken from the environment once, by the fetcher.
        trust_env=False,
    )


def classify(exc: BaseException) -> tuple[FailureKind, str] | None:
    """An aiohttp exception's failure kind and message (None: not one of aiohttp's)."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.InvalidURL):
        return FailureKind.INVALID_URL, f"invalid URL: {text}"
    dns_error = getattr(aiohttp, "ClientConnectorDNSError", None)
    if dns_error is not None and isinstance(exc, dns_error):
        return FailureKind.DNS, f"DNS lookup failed: {text}"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return FailureKind.TLS, f"TLS error: {text}"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return FailureKind.INVALID_RESPONSE, f"invalid response body: {text}"
    if isinstance(exc, aiohttp.ClientResponseError):
        return FailureKind.INVALID_RESPONSE, f"invalid response: {exc.message or text}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror or str(exc.os_error)
        return FailureKind.CONNECTION, f"cannot connect to {exc.host}:{exc.port}: {reason}"
    if isinstance(exc, aiohttp.ClientConnectionError):
        return FailureKind.CONNECTION, f"connection failed: {text}"
    return None
