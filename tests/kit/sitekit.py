"""Loopback HTTP servers for crawler tests.

Every crawler test talks to real servers on loopback, never to mocked networking:

* ``SiteServer`` serves a declarative ``Site`` (a dict of path -> ``Page``) with a real
  aiohttp server and counts every request it receives, including 404s.
* ``HostileServer`` serves a catalog of bad behaviours (endless bodies, drips, redirect
  loops, broken encodings, resets, silence...), each bounded so a test cannot hang forever,
  and counts requests the same way.

Both are async context managers; ``tests/conftest.py`` wraps them in fixtures.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import html
import inspect
import re
import socket
import struct
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import brotli
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

__all__ = [
    "BIG_HTML_FIRST_LINK",
    "BIG_HTML_LAST_LINK",
    "DEEP_LINK",
    "HOSTILE_ROUTES",
    "LATIN1_HREFS",
    "MISLABELLED_HREF",
    "HostileServer",
    "Page",
    "RequestLog",
    "RequestRecord",
    "Site",
    "SiteServer",
    "page_html",
    "wait_until",
    "wait_until_sync",
]

# How long aiohttp waits for handlers at shutdown. Our handlers stop as soon as the
# server's closing event is set, so this is only a backstop.
_SHUTDOWN_TIMEOUT_S = 1.0


# ---------------------------------------------------------------------------
# waiting on conditions (tests never sleep to wait for things)
# ---------------------------------------------------------------------------


def _describe(predicate: Callable[[], Any], message: str | None) -> str:
    return message or getattr(predicate, "__name__", repr(predicate))


async def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 10.0,  # noqa: ASYNC109 - a bound on polling, not on one awaitable
    interval: float = 0.01,
    message: str | None = None,
) -> Any:
    """Poll ``predicate`` (sync, or returning an awaitable) until it is truthy.

    Returns the truthy value; raises AssertionError naming the condition after ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"condition not met within {timeout}s: {_describe(predicate, message)}"
            )
        await asyncio.sleep(interval)


def wait_until_sync(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    interval: float = 0.01,
    message: str | None = None,
) -> Any:
    """Blocking twin of ``wait_until`` for tests whose subject runs in a thread/process."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"condition not met within {timeout}s: {_describe(predicate, message)}"
            )
        time.sleep(interval)


# ---------------------------------------------------------------------------
# site description
# ---------------------------------------------------------------------------


@dataclass
class Page:
    """One resource of a Site. Defaults give a 200 HTML page with no links."""

    links: Sequence[str] = ()  # rendered as <a href="...">
    assets: Sequence[str] = ()  # rendered as <img src="...">
    status: int = 200
    body: bytes | str | None = None  # served verbatim instead of generated HTML
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    redirect_to: str | None = None  # Location; status 301 unless status is set to a non-200
    delay_s: float = 0.0  # server-side wait before answering
    head_status: int | None = None  # status for HEAD when it differs (e.g. 405)


Site = dict[str, Page]


def page_html(links: Iterable[str] = (), assets: Iterable[str] = (), title: str = "page") -> str:
    """A complete, realistic HTML document linking to ``links`` and embedding ``assets``."""
    esc = functools.partial(html.escape, quote=True)
    items = "\n".join(f'      <li><a href="{esc(h)}">{esc(h)}</a></li>' for h in links)
    imgs = "\n".join(f'    <img src="{esc(s)}" alt="">' for s in assets)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n'
        "  <head>\n"
        '    <meta charset="utf-8">\n'
        f"    <title>{esc(title)}</title>\n"
        "  </head>\n"
        "  <body>\n"
        f"    <h1>{esc(title)}</h1>\n"
        "    <ul>\n"
        f"{items}\n"
        "    </ul>\n"
        f"{imgs}\n"
        "  </body>\n"
        "</html>\n"
    )


def _canonical(target: str) -> str:
    """RFC 3986 equivalent form of a request target (percent-encoding normalised)."""
    try:
        return str(URL(target))
    except (ValueError, TypeError):
        return target


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset":
            name = value.strip().strip('"')
            try:
                return codecs.lookup(name).name
            except LookupError:
                break
    return "utf-8"


# ---------------------------------------------------------------------------
# request accounting
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestRecord:
    method: str
    target: str  # path and query exactly as sent on the request line
    host: str  # Host header ("" when absent)
    headers: Mapping[str, str]


class RequestLog:
    """What a server received: every request in arrival order, plus concurrency."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path_qs) pairs in arrival order."""
        return [(r.method, r.target) for r in self.records]

    def count(self, path: str, method: str | None = None) -> int:
        """Requests for ``path`` (exact, or percent-encoding-equivalent), optionally by method."""
        want = _canonical(path)
        return sum(
            1
            for r in self.records
            if (method is None or r.method == method.upper())
            and (r.target == path or _canonical(r.target) == want)
        )

    def paths_requested(self, method: str | None = None) -> Counter[str]:
        """Counter of request targets as sent, optionally for one method."""
        return Counter(
            r.target for r in self.records if method is None or r.method == method.upper()
        )

    def reset_counts(self) -> None:
        self.records.clear()
        self.max_in_flight = self.in_flight

    def _arrive(self, method: str, target: str, host: str, headers: Mapping[str, str]) -> None:
        self.records.append(RequestRecord(method.upper(), target, host, headers))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _depart(self) -> None:
        self.in_flight -= 1


Responder = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


class _HttpListener:
    """An aiohttp low-level server on one loopback address that accounts into a RequestLog."""

    def __init__(self, log: RequestLog, respond: Responder, host: str, port: int) -> None:
        self._log = log
        self._respond = respond
        self.bind_host = host
        self._want_port = port
        self.port = 0
        self._runner: web.ServerRunner | None = None
        self._server: web.Server | None = None

    @property
    def open_connections(self) -> int:
        """Connections not closed yet, or whose last request is still being handled."""
        return len(self._server.connections) if self._server is not None else 0

    async def start(self) -> None:
        server = self._server = web.Server(self._handle, access_log=None)
        runner = web.ServerRunner(server, shutdown_timeout=_SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, self.bind_host, self._want_port)
        await site.start()
        self.port = runner.addresses[0][1]

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        self._log._arrive(
            request.method,
            request.raw_path,
            request.headers.get("Host", ""),
            CIMultiDictProxy(CIMultiDict(request.headers)),
        )
        try:
            resp = await self._respond(request)
            # Finish the response here so in_flight covers the whole exchange.
            try:
                await resp.prepare(request)
                await resp.write_eof()
            except ConnectionError:
                pass
            return resp
        finally:
            self._log._depart()


class _Closable:
    """Shared start/stop plumbing: a closing event that long-running handlers watch."""

    _closing: asyncio.Event

    async def _pause(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; return True early if the server is closing."""
        if self._closing.is_set():
            return True
        if seconds <= 0:
            return False
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except TimeoutError:
            return False
        return True


# ---------------------------------------------------------------------------
# SiteServer
# ---------------------------------------------------------------------------


class SiteServer(RequestLog, _Closable):
    """Serves ``site`` on http://host:port; unknown paths answer 404 (and are counted).

    ``site`` is used by reference: tests may add, replace or remove pages while it runs.
    """

    def __init__(self, site: Site, host: str = "127.0.0.1", port: int = 0) -> None:
        RequestLog.__init__(self)
        self.site = site
        self._canonical_keys: frozenset[str] = frozenset()
        self._canonical_map: dict[str, str] = {}
        self._listener = _HttpListener(self, self._respond, host, port)
        self._closing = asyncio.Event()

    # -- addresses ---------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._listener.port

    @property
    def open_connections(self) -> int:
        return self._listener.open_connections

    @property
    def host(self) -> str:
        """host:port, as in a URL authority or a Host header."""
        return f"{self._listener.bind_host}:{self.port}"

    @property
    def origin(self) -> str:
        return f"http://{self.host}"

    def url(self, path: str = "/") -> str:
        if not path.startswith("/"):
            path = "/" + path
        return self.origin + path

    # -- lifecycle ---------------------------------------------------------------
    async def start(self) -> Self:
        self._closing = asyncio.Event()
        await self._listener.start()
        return self

    async def close(self) -> None:
        self._closing.set()
        await self._listener.close()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- serving -----------------------------------------------------------------
    def lookup(self, target: str) -> Page | None:
        """The Page for a request target: exact match, else percent-encoding-equivalent."""
        page = self.site.get(target)
        if page is not None:
            return page
        keys = frozenset(self.site)
        if keys != self._canonical_keys:
            self._canonical_map = {_canonical(key): key for key in keys}
            self._canonical_keys = keys
        key = self._canonical_map.get(_canonical(target))
        return None if key is None else self.site.get(key)

    async def _respond(self, request: web.BaseRequest) -> web.StreamResponse:
        page = self.lookup(request.raw_path)
        if page is None:
            return web.Response(
                status=404,
                body=page_html(title="404 not found").encode(),
                headers={"Content-Type": "text/html; charset=utf-8"},
            )
        if page.delay_s > 0:
            await self._pause(page.delay_s)

        status = page.status
        headers: CIMultiDict[str] = CIMultiDict({"Content-Type": page.content_type})
        if page.redirect_to is not None:
            if status == 200:
                status = 301
            headers["Location"] = page.redirect_to
        if request.method == "HEAD" and page.head_status is not None:
            status = page.head_status
        headers.update(page.headers)

        body: bytes | None
        if page.body is None:
            title = request.raw_path if page.redirect_to is None else "moved"
            body = page_html(page.links, page.assets, title=title).encode("utf-8")
        elif isinstance(page.body, str):
            body = page.body.encode(_charset(headers.get("Content-Type", "")))
        else:
            body = page.body
        if status < 200 or status in (204, 304):
            body = None
            headers.popall("Content-Type", None)
        return web.Response(status=status, body=body, headers=headers)


# ---------------------------------------------------------------------------
# HostileServer
# ---------------------------------------------------------------------------

# Links planted in hostile pages. Targets under /ok/ answer 200 whatever the query.
DEEP_LINK = "/ok/deep-leaf"
LATIN1_HREFS = ("/ok/latin1?q=café", "/ok/latin1?q=€uro&lang=français")
MISLABELLED_HREF = "/ok/mislabelled?q=naïve"
BIG_HTML_FIRST_LINK = "/ok/big-start"
BIG_HTML_LAST_LINK = "/ok/big-end"

# Behaviours served by the raw asyncio socket server (second port).
_RAW_ROUTES = frozenset(
    {"huge-headers", "bad-chunked", "reset", "silent", "odd-bytes", "odd-target"}
)
_HTTP_ROUTES = frozenset(
    {
        "endless",
        "drip",
        "loop-a",
        "loop-b",
        "chain",
        "bad-gzip",
        "bad-brotli",
        "brotli-bomb",
        "gzip-bomb",
        "big-html",
        "deep",
        "latin1",
        "mislabelled",
        "ok",
    }
)
HOSTILE_ROUTES = _RAW_ROUTES | _HTTP_ROUTES

# gzip magic and header, then bytes that are not a deflate stream.
_BAD_GZIP = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff\xfe this is not deflate" * 8
# First byte 0x1c: WBITS=16, ISLAST=0, MNIBBLES=0 (metadata), reserved bit = 1 -> invalid.
_BAD_BROTLI = b"\x1c" + b"\xde\xad\xbe\xef not brotli" * 8


@functools.lru_cache(maxsize=4)
def _deep_html(depth: int) -> bytes:
    return (
        b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>deep</title></head><body>\n'
        + b"<div>" * depth
        + f'<a href="{DEEP_LINK}">leaf</a>'.encode()
        + b"</div>" * depth
        + b"\n</body></html>\n"
    )


def _latin1_html() -> bytes:
    links = "\n".join(
        f'<li><a href="{html.escape(h)}">{html.escape(h)}</a></li>' for h in LATIN1_HREFS
    )
    text = (
        "<!DOCTYPE html>\n<html><head>"
        '<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">'
        "<title>Café \u2013 €</title></head><body>\n"
        f"<h1>Crème brûlée</h1><ul>\n{links}\n</ul>\n</body></html>\n"
    )
    return text.encode("windows-1252")


def _mislabelled_html() -> bytes:
    text = (
        "<!DOCTYPE html>\n<html><head><title>naïve café</title></head><body>\n"
        f'<a href="{html.escape(MISLABELLED_HREF)}">naïve</a>\n</body></html>\n'
    )
    return text.encode("utf-8")


def _query_int(request: web.BaseRequest, name: str, default: int) -> int:
    try:
        return int(request.query.get(name, default))
    except ValueError:
        return default


def _query_float(request: web.BaseRequest, name: str, default: float) -> float:
    try:
        return float(request.query.get(name, default))
    except ValueError:
        return default


BOMB_BYTES = 512 * 1024**2


@functools.cache
def _bomb(encoding: str) -> bytes:
    """``BOMB_BYTES`` of zeros after an HTML start, compressed, made once a process."""
    zeros = b"\0" * (64 * 1024**2)
    if encoding == "br":
        packer = brotli.Compressor(quality=1)
        pack, end = packer.process, packer.finish
    else:
        deflate = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        pack, end = deflate.compress, deflate.flush
    parts = [pack(b"<!DOCTYPE html><html><body>")]
    parts += [pack(zeros) for _ in range(BOMB_BYTES // len(zeros))]
    return b"".join([*parts, end()])


def _raw_page(status: bytes, title: str) -> bytes:
    """A whole answer with a small HTML page, the connection closed after it."""
    body = page_html(title=title).encode()
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html; charset=utf-8\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
    )


ODD_TARGET = b"/odd-target/caf"  # /odd-target/caf%XXe answers 200 for the byte XX


def _odd_bytes(where: str, byte: bytes) -> bytes:
    """An answer with ``byte`` inside its reason phrase, content type, validators or Location."""
    body = page_html(title="odd bytes").encode()
    reason, kind, extra = b"OK", b"text/html", b""
    if where == "reason":
        reason, body = b"Not" + byte + b"Found", b""
    elif where == "type":
        kind = b"text/ht" + byte + b"ml"
    elif where == "validators":
        extra = b'ETag: "a' + byte + b'b"\r\nLast-Modified: Mon' + byte + b"day\r\n"
    elif where == "location":  # a redirect to ODD_TARGET with the byte in its path
        extra, body = b"Location: " + ODD_TARGET + byte + b"e\r\n", b""
    status = {"reason": b"404", "location": b"302"}.get(where, b"200")
    return (
        b"HTTP/1.1 "
        + status
        + b" "
        + reason
        + b"\r\nContent-Type: "
        + kind
        + b"\r\n"
        + extra
        + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
        + body
    )


class HostileServer(RequestLog, _Closable):
    """A catalog of bad server behaviours on loopback, one per path.

    HTTP-level behaviours run on an aiohttp server (``.origin``); behaviours that need
    to break HTTP itself run on a raw asyncio socket server (``.raw_origin``).
    ``url(name)`` picks the right one. Tunables are query parameters:

    ==============  ========================================================================
    /endless        200 text/html, chunks forever until the client leaves (``?chunk=``)
    /drip           one byte now, then one per ``?interval=`` s (1.0) up to ``?bytes=`` (600)
    /loop-a         302 -> /loop-b -> 302 -> /loop-a ...
    /chain/N        302 -> /chain/N-1 ... /chain/0 answers 200
    /bad-gzip       Content-Encoding: gzip, garbage body
    /bad-brotli     Content-Encoding: br, garbage body
    /brotli-bomb    Content-Encoding: br, a few KB that inflate to ``BOMB_BYTES`` (zeros)
    /gzip-bomb      Content-Encoding: gzip, the same (about 2 MB of it)
    /big-html       HTML of exactly ``?size=`` bytes (100 MB), streamed in chunks
    /deep           ``?depth=`` (100000) nested <div>, DEEP_LINK in the innermost
    /latin1         windows-1252 page (correctly labelled) with LATIN1_HREFS
    /mislabelled    utf-8 bytes labelled iso-8859-1, containing MISLABELLED_HREF
    /ok/...         200 small HTML page (targets of the planted links)
    /huge-headers   raw: ~``?size=`` (1 MiB) of headers; ``?single=1`` makes one huge line
    /bad-chunked    raw: Transfer-Encoding: chunked with an invalid chunk-size line
    /reset          raw: headers + part of the body, then TCP RST
    /silent         raw: reads the request, never answers
    /odd-bytes      raw: byte ``?byte=`` (hex: 00, ff) in the ``?where=`` part of the answer:
                    ``reason`` (a 404's), ``type`` (Content-Type), ``validators`` (ETag
                    and Last-Modified of a page), ``location`` (a 302 to /odd-target/caf<byte>e)
    /odd-target/*   raw: 200 for /odd-target/caf%XXe (a byte percent-encoded), else 404
    ==============  ========================================================================

    Endless, drip and silent stop by themselves after ``max_duration_s`` and at close.
    """

    def __init__(self, host: str = "127.0.0.1", max_duration_s: float = 60.0) -> None:
        RequestLog.__init__(self)
        self.bind_host = host
        self.max_duration_s = max_duration_s
        self._listener = _HttpListener(self, self._respond, host, 0)
        self._raw_server: asyncio.Server | None = None
        self._raw_tasks: set[asyncio.Task[None]] = set()
        self.raw_port = 0
        self._closing = asyncio.Event()

    # -- addresses ---------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._listener.port

    @property
    def host(self) -> str:
        return f"{self.bind_host}:{self.port}"

    @property
    def origin(self) -> str:
        return f"http://{self.host}"

    @property
    def raw_origin(self) -> str:
        return f"http://{self.bind_host}:{self.raw_port}"

    def url(self, name: str = "/") -> str:
        """Absolute URL of a behaviour: ``url("endless")``, ``url("chain/50")``, ..."""
        path = name if name.startswith("/") else "/" + name
        first = path[1:].split("?", 1)[0].split("/", 1)[0]
        return (self.raw_origin if first in _RAW_ROUTES else self.origin) + path

    # -- lifecycle ---------------------------------------------------------------
    async def start(self) -> Self:
        self._closing = asyncio.Event()
        await self._listener.start()
        self._raw_server = await asyncio.start_server(self._raw_connection, self.bind_host, 0)
        self.raw_port = self._raw_server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        self._closing.set()
        if self._raw_server is not None:
            raw, self._raw_server = self._raw_server, None
            raw.close()
            tasks = list(self._raw_tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await raw.wait_closed()
        await self._listener.close()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- aiohttp behaviours --------------------------------------------------------
    async def _respond(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        first, _, rest = path[1:].partition("/")
        html_ct = {"Content-Type": "text/html; charset=utf-8"}
        if path == "/endless":
            return await self._endless(request)
        if path == "/drip":
            return await self._drip(request)
        if path == "/loop-a":
            return web.Response(status=302, headers={"Location": "/loop-b"})
        if path == "/loop-b":
            return web.Response(status=302, headers={"Location": "/loop-a"})
        if first == "chain" and rest.isdigit():
            n = int(rest)
            if n == 0:
                return web.Response(body=page_html(title="end of chain").encode(), headers=html_ct)
            return web.Response(status=302, headers={"Location": f"/chain/{n - 1}"})
        if path == "/bad-gzip":
            return web.Response(body=_BAD_GZIP, headers={**html_ct, "Content-Encoding": "gzip"})
        if path in ("/brotli-bomb", "/gzip-bomb"):
            encoding = "br" if path == "/brotli-bomb" else "gzip"
            headers = {**html_ct, "Content-Encoding": encoding}
            return web.Response(body=_bomb(encoding), headers=headers)
        if path == "/bad-brotli":
            return web.Response(body=_BAD_BROTLI, headers={**html_ct, "Content-Encoding": "br"})
        if path == "/big-html":
            return await self._big_html(request)
        if path == "/deep":
            depth = _query_int(request, "depth", 100_000)
            return web.Response(body=_deep_html(depth), headers=html_ct)
        if path == "/latin1":
            return web.Response(
                body=_latin1_html(),
                headers={"Content-Type": "text/html; charset=windows-1252"},
            )
        if path == "/mislabelled":
            return web.Response(
                body=_mislabelled_html(),
                headers={"Content-Type": "text/html; charset=iso-8859-1"},
            )
        if first == "ok":
            return web.Response(body=page_html(title="ok").encode(), headers=html_ct)
        return web.Response(status=404, body=page_html(title="404").encode(), headers=html_ct)

    async def _endless(self, request: web.BaseRequest) -> web.StreamResponse:
        chunk_size = max(1, _query_int(request, "chunk", 64 * 1024))
        unit = b"<p>endless endless endless endless endless endless endless</p>\n"
        chunk = (unit * (chunk_size // len(unit) + 1))[:chunk_size]
        resp = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        deadline = time.monotonic() + self.max_duration_s
        try:
            await resp.prepare(request)
            await resp.write(b"<!DOCTYPE html>\n<html><head><title>endless</title></head><body>\n")
            while not self._closing.is_set() and time.monotonic() < deadline:
                await resp.write(chunk)
        except ConnectionError:
            pass
        return resp

    async def _drip(self, request: web.BaseRequest) -> web.StreamResponse:
        interval = _query_float(request, "interval", 1.0)
        total = _query_int(request, "bytes", 600)
        resp = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        deadline = time.monotonic() + self.max_duration_s
        try:
            await resp.prepare(request)
            for i in range(total):
                if i and (await self._pause(interval) or time.monotonic() >= deadline):
                    break
                await resp.write(b"<" if i == 0 else b".")
        except ConnectionError:
            pass
        return resp

    async def _big_html(self, request: web.BaseRequest) -> web.StreamResponse:
        head = (
            b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>big</title></head>'
            + f'<body>\n<a href="{BIG_HTML_FIRST_LINK}">first</a>\n'.encode()
        )
        tail = f'<a href="{BIG_HTML_LAST_LINK}">last</a>\n</body></html>\n'.encode()
        size = max(_query_int(request, "size", 100_000_000), len(head) + len(tail))
        unit = b"<p>lorem ipsum dolor sit amet, consectetur adipiscing elit</p>\n"
        chunk = unit * (64 * 1024 // len(unit))
        resp = web.StreamResponse(
            headers={"Content-Type": "text/html; charset=utf-8", "Content-Length": str(size)}
        )
        try:
            await resp.prepare(request)
            await resp.write(head)
            remaining = size - len(head) - len(tail)
            while remaining >= len(chunk):
                if self._closing.is_set():
                    return resp
                await resp.write(chunk)
                remaining -= len(chunk)
            await resp.write(b"\n" * remaining)
            await resp.write(tail)
        except ConnectionError:
            pass
        return resp

    # -- raw-socket behaviours -------------------------------------------------------
    async def _raw_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._raw_tasks.add(task)
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, _, rest = lines[0].partition(" ")
            target = rest.rpartition(" ")[0] or rest
            headers: CIMultiDict[str] = CIMultiDict()
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if sep:
                    headers.add(name.strip(), value.strip())
            self._arrive(method, target, headers.get("Host", ""), CIMultiDictProxy(headers))
            try:
                await self._raw_dispatch(URL(target), reader, writer)
            finally:
                self._depart()
        except ConnectionError:
            pass
        finally:
            writer.close()
            self._raw_tasks.discard(task)

    async def _raw_dispatch(
        self, url: URL, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        path = url.path
        if path == "/silent":
            # Never answer; stop when the client hangs up, the server closes, or time is up.
            waits = [
                asyncio.ensure_future(reader.read()),
                asyncio.ensure_future(self._closing.wait()),
            ]
            try:
                await asyncio.wait(
                    waits, timeout=self.max_duration_s, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                for w in waits:
                    w.cancel()
                await asyncio.gather(*waits, return_exceptions=True)
            return
        if path == "/huge-headers":
            size = int(url.query.get("size", 1024 * 1024))
            if url.query.get("single") == "1":
                filler = b"X-Huge: " + b"a" * size + b"\r\n"
            else:
                line = b"X-Filler-%05d: " + b"a" * 1000 + b"\r\n"
                filler = b"".join(line % i for i in range(max(1, size // len(line % 0))))
            body = page_html(title="huge headers").encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                + filler
                + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                + body
            )
            await writer.drain()
            return
        if path == "/bad-chunked":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                b"f\r\n<!DOCTYPE html>\r\n"
                b"zz-not-a-size\r\n<html><body>broken</body></html>\r\n"
                b"0\r\n\r\n"
            )
            await writer.drain()
            return
        if path == "/reset":
            partial = b"<!DOCTYPE html>\n<html><head><title>reset</title></head><body>\n"
            partial += b"<p>partial</p>\n" * 64
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                b"Content-Length: 100000\r\n\r\n" + partial
            )
            await writer.drain()
            # Give the client time to take in the headers before the RST destroys them.
            await self._pause(0.1)
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        if path.startswith("/odd-target/"):  # only the byte percent-encoded as it came
            found = re.fullmatch(re.escape(ODD_TARGET.decode()) + "%([0-9A-F]{2})e", url.raw_path)
            writer.write(_raw_page(b"200 OK" if found else b"404 Not Found", "odd target"))
            await writer.drain()
            return
        if path == "/odd-bytes":
            writer.write(_odd_bytes(url.query.get("where", ""), bytes.fromhex(url.query["byte"])))
            await writer.drain()
            return
        writer.write(_raw_page(b"404 Not Found", "404"))
        await writer.drain()
