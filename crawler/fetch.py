"""The one place that talks HTTP: an aiohttp session and three small functions.

Pages are fetched with GET and the same response's body is handed to the
parser (never a second request). Links are checked with HEAD, falling back to
GET when a server refuses HEAD. Redirects are not followed here: each hop is
a frontier row of its own, so every URL is requested once. Bodies are
streamed and capped; binaries are never downloaded. Every failure comes back
as a ``Fetched`` with a ``FailureKind``, never as an exception.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from types import TracebackType

import aiohttp
from yarl import URL

from crawler.config import CrawlSettings
from crawler.errors import FailureKind

# Statuses with which servers refuse HEAD although GET works.
HEAD_REFUSED = frozenset({400, 403, 405, 406, 501})
HTML_TYPES = ("text/html", "application/xhtml+xml")
READ_CHUNK = 64 * 1024


@dataclass(slots=True)
class Fetched:
    """What one request produced: a response, or the failure that stopped it."""

    method: str
    status: int | None = None
    reason: str | None = None
    failure: FailureKind | None = None
    error: str | None = None
    content_type: str | None = None
    location: str | None = None
    retry_after: str | None = None
    robots_tag: str | None = None
    body: bytes | None = None
    truncated: bool = False
    size: int | None = None
    elapsed_ms: int = 0

    @property
    def is_html(self) -> bool:
        """Does the server say this is an HTML document?"""
        media = (self.content_type or "").split(";", 1)[0].strip().lower()
        return media in HTML_TYPES


class Fetcher:
    """An aiohttp session configured from the settings; an async context manager."""

    def __init__(self, settings: CrawlSettings) -> None:
        self._settings = settings
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Fetcher:
        connector = aiohttp.TCPConnector(
            limit=self._settings.max_concurrency, limit_per_host=0, ttl_dns_cache=300
        )
        headers = {"User-Agent": self._settings.user_agent, **self._settings.headers}
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=self._settings.timeout_s),
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=True,
            trust_env=True,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch_page(self, url: str) -> Fetched:
        """GET a page; read its body (capped) when it is HTML and successful."""
        return await self._request("GET", url, read_html=True)

    async def check(self, url: str) -> Fetched:
        """HEAD a link, with GET (body unread) when the server refuses HEAD."""
        fetched = await self._request("HEAD", url, read_html=False)
        if fetched.status in HEAD_REFUSED:
            fetched = await self._request("GET", url, read_html=False)
        return fetched

    async def _request(self, method: str, url: str, *, read_html: bool) -> Fetched:
        assert self._session is not None, "use Fetcher as an async context manager"
        started = time.monotonic()
        fetched = Fetched(method=method)
        try:
            async with self._session.request(
                method, URL(url, encoded=True), allow_redirects=False
            ) as response:
                fetched.status = response.status
                fetched.reason = response.reason
                headers = response.headers
                fetched.content_type = headers.get("Content-Type")
                fetched.location = headers.get("Location")
                fetched.retry_after = headers.get("Retry-After")
                fetched.robots_tag = headers.get("X-Robots-Tag")
                fetched.size = response.content_length
                if read_html and 200 <= response.status < 300 and fetched.is_html:
                    await self._read_capped(response, fetched)
        except Exception as exc:  # every failure becomes data on the link
            fetched.failure, fetched.error = classify_exception(exc)
            fetched.body = None
        fetched.elapsed_ms = int((time.monotonic() - started) * 1000)
        return fetched

    async def _read_capped(self, response: aiohttp.ClientResponse, fetched: Fetched) -> None:
        cap = self._settings.max_body_bytes
        chunks: list[bytes] = []
        size = 0
        while size < cap:
            chunk = await response.content.read(min(READ_CHUNK, cap - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        else:
            fetched.truncated = not response.content.at_eof()
        fetched.body = b"".join(chunks)
        fetched.size = size


def classify_exception(exc: BaseException) -> tuple[FailureKind, str]:
    """Map a client exception to a failure kind and a one-line message."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return FailureKind.TIMEOUT, "timed out"
    if isinstance(exc, aiohttp.InvalidURL):
        return FailureKind.INVALID_URL, f"invalid URL: {text}"
    dns_error = getattr(aiohttp, "ClientConnectorDNSError", None)
    if dns_error is not None and isinstance(exc, dns_error):
        return FailureKind.DNS, f"DNS lookup failed: {text}"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return FailureKind.TLS, f"TLS error: {text}"
    if isinstance(exc, ssl.SSLError):
        return FailureKind.TLS, f"TLS error: {text}"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return FailureKind.INVALID_RESPONSE, f"invalid response body: {text}"
    if isinstance(exc, aiohttp.ClientResponseError):
        return FailureKind.INVALID_RESPONSE, f"invalid response: {exc.message or text}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror or str(exc.os_error)
        return FailureKind.CONNECTION, f"cannot connect to {exc.host}:{exc.port}: {reason}"
    if isinstance(exc, aiohttp.ClientConnectionError | OSError):
        return FailureKind.CONNECTION, f"connection failed: {text}"
    return FailureKind.INVALID_RESPONSE, f"{type(exc).__name__}: {text}"
