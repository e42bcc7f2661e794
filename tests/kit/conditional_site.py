"""A loopback site that answers conditional requests, and counts them, for re-crawl tests.

``ConditionalSite`` serves ``pages`` (path -> HTML; a missing path is a 404)
from an aiohttp server on its own thread, so a test can run the CLI as a
subprocess while it answers. Every page carries an ``ETag`` (a hash of its
body) and a ``Last-Modified`` (when its body last changed); a GET whose
``If-None-Match`` names the current ETag (or, without one, whose
``If-Modified-Since`` is not older than the page) is answered ``304 Not
Modified`` without a body. Change ``pages`` between crawls (not during one).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections import Counter
from email.utils import formatdate, parsedate_to_datetime
from types import TracebackType
from typing import Self

from aiohttp import web

START_TIMEOUT_S = 10.0


class ConditionalSite:
    """Serve ``pages`` with validators; count full GETs, 304s and HEADs per path."""

    def __init__(self, pages: dict[str, str]) -> None:
        self._pages = dict(pages)
        self._modified: dict[str, float] = dict.fromkeys(pages, time.time() - 3600)
        self.full: Counter[str] = Counter()  # GETs answered with a body (or a 404)
        self.not_modified: Counter[str] = Counter()  # GETs answered 304
        self.conditional: Counter[str] = Counter()  # GETs that carried a validator
        self.heads: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- the site ----------------------------------------------------------------
    def set_page(self, path: str, body: str) -> None:
        """Add or change a page (its ETag and Last-Modified change with it)."""
        with self._lock:
            if self._pages.get(path) != body:
                self._pages[path] = body
                self._modified[path] = time.time()

    def remove_page(self, path: str) -> None:
        with self._lock:
            self._pages.pop(path, None)

    def reset_counts(self) -> None:
        with self._lock:
            for counter in (self.full, self.not_modified, self.conditional, self.heads):
                counter.clear()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    # -- serving -----------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        with self._lock:
            body = self._pages.get(path)
            modified = self._modified.get(path, 0.0)
            if request.method == "HEAD":
                self.heads[path] += 1
            conditional = "If-None-Match" in request.headers or (
                "If-Modified-Since" in request.headers
            )
            if request.method == "GET" and conditional:
                self.conditional[path] += 1
            if body is None:
                if request.method == "GET":
                    self.full[path] += 1
                return web.Response(status=404, text="not found")
            etag = '"' + hashlib.sha1(body.encode()).hexdigest()[:16] + '"'  # noqa: S324 - a tag
            last_modified = formatdate(int(modified), usegmt=True)
            headers = {"ETag": etag, "Last-Modified": last_modified}
            if request.method == "GET" and _unchanged(request, etag, int(modified)):
                self.not_modified[path] += 1
                return web.Response(status=304, headers=headers)
            if request.method == "GET":
                self.full[path] += 1
        return web.Response(
            body=body.encode(), content_type="text/html", charset="utf-8", headers=headers
        )

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(START_TIMEOUT_S)
        return self

    def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(START_TIMEOUT_S)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(START_TIMEOUT_S)
        if not self._loop.is_closed():
            self._loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _unchanged(request: web.Request, etag: str, modified: int) -> bool:
    """RFC 9110 13.2.2: If-None-Match decides when present, else If-Modified-Since."""
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match is not None:
        return etag in [tag.strip() for tag in if_none_match.split(",")] or if_none_match == "*"
    since = request.headers.get("If-Modified-Since")
    if since is None:
        return False
    try:
        return modified <= parsedate_to_datetime(since).timestamp()
    except (TypeError, ValueError):
        return False
