"""The one place that talks HTTP: the crawl's own client, aiohttp for proxies, a few functions.

A request goes over the crawl's own HTTP/1.1 connections (``crawler.net.pool``,
half of aiohttp's client CPU per request) unless ``HTTP_PROXY``/``HTTPS_PROXY``
sends it through a proxy, which aiohttp's session speaks to (imported then
only: ``crawler.net.proxied``); both answers are read by the same code
(``Response``).

Pages are fetched with GET and the same response's body is handed to the
parser (never a second request); a page sent without a Content-Type is read
far enough to sniff whether it is HTML (``crawler.sniff``). Links are checked
with HEAD; a HEAD answer that would make a link broken or blocked is
confirmed with a GET whose body is not read, and only the GET's answer
counts. Servers that answered HEAD otherwise than GET are remembered per host
and asked with GET alone from then on. Redirects are not followed here: each
hop is a frontier row of its own, so every URL is requested once. Bodies are
streamed and capped; binaries are never downloaded. Every failure comes back
as a ``Fetched`` with a ``FailureKind``, never as an exception.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol

from yarl import URL

from crawler.config import DEFAULT_MAX_COOKIES_PER_HOST, CrawlSettings
from crawler.errors import FailureKind
from crawler.fetch_types import Fetched
from crawler.net import localsite, storable
from crawler.net.failures import ConnectFailed, NameNotResolved, ResponseError
from crawler.net.heads import RequestHeads, host_header
from crawler.net.jar import Jar
from crawler.net.missing_names import MissingNames
from crawler.net.pool import ConnectionPool
from crawler.net.resolver import AddressGuard, system_resolver
from crawler.netguard import PrivateAddressError, parse_networks
from crawler.patterns import compile_pattern
from crawler.sniff import SNIFF_BYTES, looks_like_html
from crawler.status import parse_accept
from crawler.urls import request_target

if TYPE_CHECKING:
    import aiohttp


__all__ = ["Fetched", "Fetcher", "classify_exception"]

READ_CHUNK = 64 * 1024
# Hosts remembered as answering HEAD otherwise than GET (beyond this, forgotten).
MAX_HEAD_UNRELIABLE_HOSTS = 100_000
# The schemes sent over the crawl's own connections (crawler.net.pool) unless proxied.
_DIRECT = frozenset({"http", "https"})
POLICY_HEADERS = ("cf-mitigated", "server")
# What a browser needs of the answers to a rendered page's requests (``--render``).
RESOURCE_HEADERS = (
    "access-control-allow-origin",
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-expose-headers",
)
# "seed": a page named as an input, whose body is read when it is plain text too.
Read = Literal["none", "html", "seed", "any", "stream"]
Feed = Callable[[bytes], bool]  # takes a chunk of a streamed body; False: no more wanted


class InvalidURL(ValueError):
    """A URL no request can be made for (no host)."""


class Body(Protocol):
    """The reading calls of an answer's body (aiohttp's ``StreamReader``, ``http1.Answer``)."""

    async def read(self, n: int = -1) -> bytes: ...
    def at_eof(self) -> bool: ...
    def iter_chunked(self, n: int) -> AsyncIterator[bytes]: ...


class Headers(Protocol):
    def get(self, key: str, /) -> str | None: ...


class Response(Protocol):
    """What the fetcher reads of an answer, whichever client brought it."""

    @property
    def status(self) -> int: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def headers(self) -> Headers: ...
    @property
    def content_length(self) -> int | None: ...
    @property
    def content(self) -> Body: ...


def _proxies_from_environment() -> dict[str, URL]:
    """HTTP(S)_PROXY as urllib reads them; urllib.request (http.client, email…) is imported
    only when some ``*_proxy`` variable is set, not by every crawl."""
    if not any(name.lower().endswith("_proxy") for name in os.environ):
        return {}
    import urllib.request

    return {
        scheme: URL(address)
        for scheme, address in urllib.request.getproxies_environment().items()
        if scheme in ("http", "https")
    }


def _proxy_bypass(host: str) -> bool:
    """NO_PROXY covers ``host`` (only asked when a proxy is set)."""
    import urllib.request

    return bool(urllib.request.proxy_bypass(host))


class Fetcher:
    """The crawl's connections (and aiohttp's session for a proxy), from the settings.

    An async context manager."""

    def __init__(self, settings: CrawlSettings, *, local_root: Path | None = None) -> None:
        self._settings = settings
        self._local = localsite.LocalSite.build(local_root, settings) if local_root else None
        self._session: aiohttp.ClientSession | None = None
        self._pool: ConnectionPool | None = None
        self._heads = RequestHeads({"User-Agent": settings.user_agent, **settings.headers})
        # A --header "Cookie: …": sent with the jar's cookies, as aiohttp merged them.
        self._header_cookie = _cookie_in(settings.headers)
        self._resolver: MissingNames | None = None
        # The crawl's cookies; with --no-cookies only those of --cookie-jar, if any.
        self.jar: Jar | None = None
        self._accepted = parse_accept(settings.accept)
        self._head_unreliable: set[str] = set()
        self._proxies = _proxies_from_environment()
        self._guard = (
            AddressGuard(
                parse_networks(settings.allow_networks),
                proxies=[proxy.raw_host or "" for proxy in self._proxies.values()],
            )
            if settings.exclude_all_private
            else None
        )
        self._auth = [
            (compile_pattern(pattern), "Basic " + base64.b64encode(credentials.encode()).decode())
            for pattern, _, credentials in (e.partition(" ") for e in settings.basic_auth)
        ]

    async def __aenter__(self) -> Fetcher:
        settings = self._settings
        self._resolver = MissingNames(
            self._guard.resolver if self._guard is not None else system_resolver()
        )
        if settings.cookies or settings.cookie_jar:
            self.jar = Jar(DEFAULT_MAX_COOKIES_PER_HOST)
            if settings.cookie_jar:
                from crawler.net import cookies

                cookies.load(self.jar.real(), settings.cookie_jar)
        self._pool = ConnectionPool(
            self._resolver, limit=settings.max_concurrency, verify_tls=not settings.insecure
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._resolver is not None:
            await self._resolver.close()
            self._resolver = None
        if self.jar is not None and self._settings.cookie_jar:
            from crawler.net import cookies

            cookies.save(self.jar.real(), self._settings.cookie_jar)

    async def fetch_page(
        self,
        url: str,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        seed: bool = False,
    ) -> Fetched:
        """GET a page; read its body (capped) when it is HTML, CSS or Markdown and successful.

        A ``seed`` (named as an input) is read when it is plain text too
        (``notes.txt``, ``README.rst``): its URLs are checked, as lychee checks
        any file it is given. With a validator the request is conditional
        (``If-None-Match``, ``If-Modified-Since``): a ``304 Not Modified`` comes
        back without a body.
        """
        conditional: dict[str, str] = {}
        if etag:
            conditional["If-None-Match"] = etag
        if last_modified:
            conditional["If-Modified-Since"] = last_modified
        return await self._request(
            "GET", url, read="seed" if seed else "html", conditional=conditional
        )

    async def fetch_text(self, url: str) -> Fetched:
        """GET any document (robots.txt, a sitemap) and read it, capped."""
        return await self._request("GET", url, read="any")

    async def fetch_stream(self, url: str, feed: Feed, *, cap: int) -> Fetched:
        """GET a document (a sitemap) and hand its body to ``feed`` chunk by chunk.

        The body is never held whole; reading stops when ``feed`` returns False
        or after ``cap`` bytes (then ``truncated`` is set).
        """
        return await self._request("GET", url, read="stream", feed=feed, cap=cap)

    async def fetch_resource(
        self, url: str, method: str = "GET", headers: dict[str, str] | None = None
    ) -> Fetched:
        """A request of a rendered page (script, style, ``fetch()``): GET or HEAD, body read.

        The crawl's one path (guard, proxies, user agent, cookies); ``headers``
        are the few a script set (``Accept``), added to the crawl's.
        """
        return await self._request(
            method, url, read="any" if method == "GET" else "none", extra=headers
        )

    async def check(self, url: str, host: str = "") -> Fetched:
        """HEAD a link (GET with ``--method get``); a HEAD that says "broken" is asked again by GET.

        Only the GET's answer counts. When it differs, the result carries
        HEAD's status (``head_status``) and ``host`` is asked with GET alone
        from then on.
        """
        if self._settings.method == "get" or host in self._head_unreliable:
            return await self._request("GET", url, read="none")
        head = await self._request("HEAD", url, read="none")
        if not self._needs_confirming(head):
            return head
        fetched = await self._request("GET", url, read="none")
        if fetched.failure is None and fetched.status != head.status:
            fetched.head_status = head.status
            self.learn_head_unreliable([host])
        return fetched

    def learn_head_unreliable(self, hosts: Iterable[str]) -> None:
        """Ask these hosts with GET alone: their HEAD answers were not GET's."""
        for host in hosts:
            if host and len(self._head_unreliable) < MAX_HEAD_UNRELIABLE_HOSTS:
                self._head_unreliable.add(host)

    def _needs_confirming(self, head: Fetched) -> bool:
        """Would this HEAD answer make the link broken or blocked? (Not a rate limit.)"""
        status = head.status
        if head.failure is not None or status is None or status in self._accepted:
            return False
        if 300 <= status < 400 and head.location:
            return False
        # The server asks us to slow down: a GET at once would be impolite.
        return not (status == 429 or (status == 503 and head.retry_after))

    async def _request(
        self,
        method: str,
        url: str,
        *,
        read: Read,
        feed: Feed | None = None,
        cap: int = 0,
        extra: dict[str, str] | None = None,
        conditional: dict[str, str] | None = None,
    ) -> Fetched:
        """The one path of every request: the address guard, then a connection (or the local site).

        ``read="stream"`` hands the body to ``feed`` chunk by chunk, ``cap`` bytes at most;
        ``conditional`` adds a re-crawl's validator headers (a local site ignores them).
        """
        if self._local is not None and self._local.contains(url):
            if feed is not None:
                return await localsite.stream(self._local, url, feed, cap)
            return await localsite.fetch(
                self._local,
                url,
                method,
                read_html=read != "none",
                read_text=read == "seed",
                cap=self._settings.max_body_bytes,
            )
        assert self._pool is not None, "use Fetcher as an async context manager"
        started = time.monotonic()
        fetched = Fetched(method=method)
        headers = self._per_request(url)
        if extra:
            headers = {**extra, **(headers or {})}
        if conditional:
            headers = {**(headers or {}), **conditional}
        try:
            plain = None if self._proxies or self._guard is not None else request_target(url)
            if plain is not None:  # a key, on the crawl's own connections: no URL object
                await self._exchange(method, url, plain, None, headers, fetched, read, feed, cap)
            else:
                await self._request_parsed(method, url, headers, fetched, read, feed, cap)
        except Exception as exc:  # every failure becomes data on the link
            fetched.failure, fetched.error = classify_exception(exc)
            fetched.body = None
        fetched.elapsed_ms = int((time.monotonic() - started) * 1000)
        return fetched

    async def _request_parsed(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None,
        fetched: Fetched,
        read: Read,
        feed: Feed | None,
        cap: int,
    ) -> None:
        """A request that needs the URL parsed: the guard, a proxy, credentials, the unusual."""
        target = URL(url, encoded=True)
        proxy = self._proxy(target)
        if self._guard is not None:  # every request the crawler makes passes here
            await self._guard.check(target, via_proxy=proxy is not None)
        if proxy is not None or target.scheme not in _DIRECT:
            async with self._proxied().request(
                method, target, allow_redirects=False, headers=headers, proxy=proxy
            ) as response:
                await self._read_answer(response, fetched, read, feed, cap, url)
            return
        host, port = target.raw_host, target.port
        if not host or port is None:
            raise InvalidURL(url)
        parts = (target.scheme, host, port, target.raw_path_qs)
        await self._exchange(method, url, parts, target, headers, fetched, read, feed, cap)

    async def _exchange(
        self,
        method: str,
        url: str,
        parts: tuple[str, str, int, str],
        target: URL | None,
        headers: dict[str, str] | None,
        fetched: Fetched,
        read: Read,
        feed: Feed | None,
        cap: int,
    ) -> None:
        """A request without a proxy: over the crawl's own connections (``crawler.net.pool``).

        ``parts`` are the URL's scheme, host, port, path and query; ``target`` its
        yarl URL when one was made (credentials in the URL are read from it).
        """
        assert self._pool is not None
        scheme, host, port, path_qs = parts
        if target is not None and target.raw_user is not None:  # sent as aiohttp sent them
            credentials = f"{target.user or ''}:{target.password or ''}".encode()
            basic = "Basic " + base64.b64encode(credentials).decode()
            headers = {"Authorization": basic, **(headers or {})}
        jar = self.jar
        if jar is not None:
            given = _cookie_in(headers) or self._header_cookie
            if cookie := jar.cookie_header(url if target is None else target, given):
                headers = {**(headers or {}), "Cookie": cookie}
        request = self._heads.build(method, path_qs, host_header(scheme, host, port), headers)
        deadline = self._pool.clock() + self._settings.timeout_s
        async with self._pool.exchange(
            (scheme, host, port), request, head=method == "HEAD", deadline=deadline
        ) as answer:
            if jar is not None and answer.set_cookies:
                jar.take_set_cookies(answer.set_cookies, url if target is None else target)
            await self._read_answer(answer, fetched, read, feed, cap, url)

    def _proxied(self) -> aiohttp.ClientSession:
        """aiohttp's session, made for the first request through a proxy."""
        if self._session is None:
            from crawler.net import proxied

            assert self._resolver is not None
            jar = self.jar.real() if self.jar is not None else None
            self._session = proxied.open_session(self._settings, self._resolver, jar)
        return self._session

    async def _read_answer(
        self,
        response: Response,
        fetched: Fetched,
        read: Read,
        feed: Feed | None,
        cap: int,
        url: str,
    ) -> None:
        """Take the answer's headers, and its body when it is wanted."""
        self._take_headers(response, fetched)
        if not 200 <= response.status < 300:
            return
        if feed is not None:
            fetched.size, fetched.truncated = await _feed_body(response, feed, cap)
        elif _wants_body(read, fetched, url):
            await self._read_capped(response, fetched, sniff=read in ("html", "seed"))

    def _proxy(self, parsed: URL) -> URL | None:
        """The proxy for this URL from HTTP(S)_PROXY, unless NO_PROXY covers its host."""
        if not self._proxies:
            return None
        proxy = self._proxies.get(parsed.scheme)
        if proxy is None or _proxy_bypass(parsed.host or ""):
            return None
        return proxy

    def _per_request(self, url: str) -> dict[str, str] | None:
        """Headers for this URL only: its host's settings and matching credentials."""
        headers: dict[str, str] = {}
        if self._settings.hosts:
            host = URL(url, encoded=True).host or ""
            overrides = self._settings.host_settings(host)
            if overrides is not None:
                headers.update(overrides.headers)
        for pattern, authorization in self._auth:
            if pattern.search(url):
                headers["Authorization"] = authorization
                break
        return headers or None

    @staticmethod
    def _take_headers(response: Response, fetched: Fetched) -> None:
        fetched.status = response.status
        fetched.reason = storable.text(response.reason)
        headers = response.headers  # lower-case names: both clients' lookups take them
        fetched.content_type = storable.text(headers.get("content-type"))
        fetched.location = storable.location(headers.get("location"))
        fetched.retry_after = headers.get("retry-after")
        fetched.robots_tag = headers.get("x-robots-tag")
        fetched.size = response.content_length
        fetched.etag = storable.validator(headers.get("etag"))
        fetched.last_modified = storable.validator(headers.get("last-modified"))
        for name in (*POLICY_HEADERS, *RESOURCE_HEADERS):
            value = headers.get(name)
            if value is not None:
                fetched.headers[name] = value

    async def _read_capped(self, response: Response, fetched: Fetched, *, sniff: bool) -> None:
        """Read the body up to ``--max-body-bytes``; an untyped one only if it sniffs as HTML."""
        cap = self._settings.max_body_bytes
        chunks: list[bytes] = []
        size = 0
        if sniff and fetched.is_untyped:
            while size < min(cap, SNIFF_BYTES):
                chunk = await response.content.read(min(cap, SNIFF_BYTES) - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if not looks_like_html(b"".join(chunks)):
                return  # not a page: the rest is never downloaded
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


def _cookie_in(headers: dict[str, str] | None) -> str:
    """The value of a ``Cookie`` header among ``headers`` ("" when none)."""
    if not headers:  # most requests: no header of their own
        return ""
    return next((v for k, v in headers.items() if k.lower() == "cookie"), "")


def _wants_body(read: Read, fetched: Fetched, url: str) -> bool:
    """Is this answer's body read? Any for ``any``; a page's when it may hold links
    (an untyped one is sniffed), a seed's when it is plain text too."""
    if read == "any":
        return True
    if read not in ("html", "seed"):
        return False
    return (
        fetched.is_html
        or fetched.is_css
        or fetched.markdown_at(url)
        or fetched.is_untyped
        or (read == "seed" and fetched.is_plain_text)
    )


async def _feed_body(response: Response, feed: Feed, cap: int) -> tuple[int, bool]:
    """Hand the body to ``feed`` until it ends, ``feed`` declines, or ``cap``: (size, capped)."""
    size = 0
    async for chunk in response.content.iter_chunked(READ_CHUNK):
        size += len(chunk)
        if size > cap:
            return size, True
        if not feed(chunk):
            break
    return size, False


def classify_exception(exc: BaseException) -> tuple[FailureKind, str]:
    """Map a client exception to a failure kind and a one-line message."""
    text = str(exc) or type(exc).__name__
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, PrivateAddressError) or isinstance(exc, PrivateAddressError):
        return FailureKind.PRIVATE_ADDRESS, str(os_error or exc)
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return FailureKind.TIMEOUT, "timed out"
    if isinstance(exc, InvalidURL):
        return FailureKind.INVALID_URL, f"invalid URL: {text}"
    if isinstance(exc, NameNotResolved):
        return FailureKind.DNS, f"DNS lookup failed: {text}"
    if isinstance(exc, ConnectFailed):
        return FailureKind.CONNECTION, text
    if isinstance(exc, ResponseError):
        return FailureKind.INVALID_RESPONSE, f"invalid response: {text}"
    if "aiohttp" in sys.modules:  # a proxied request's failure (crawler.net.proxied)
        from crawler.net import proxied

        known = proxied.classify(exc)
        if known is not None:
            return known
    if isinstance(exc, ssl.SSLError):
        return FailureKind.TLS, f"TLS error: {text}"
    if isinstance(exc, OSError):
        return FailureKind.CONNECTION, f"connection failed: {text}"
    return FailureKind.INVALID_RESPONSE, f"{type(exc).__name__}: {text}"
