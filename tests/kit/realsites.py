"""Loopback servers that behave like real ones rather than like fixtures.

``BehaviourServer`` answers every request with a plain async handler and
records each request (method, path, arrival time, Cookie header), so a test
counts requests per method and reads the times they arrived. The handlers
here are the cases of issue 14:

- ``lying_head``: HEAD answers one status, GET another;
- ``cookie_gate``: pages answer 403 (or loop through a consent redirect)
  unless the session cookie set by the entry page comes back;
- ``UntypedServer``: a page sent without a Content-Type.

``ThreadedBehaviour`` runs one on its own thread, for tests that block on a
crawler subprocess.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from aiohttp import web

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
START_TIMEOUT_S = 10.0
SESSION = "session"
SESSION_VALUE = "s3cr3t"


@dataclass(frozen=True)
class Arrival:
    """One request as the server saw it."""

    method: str
    path: str  # with its query
    at: float  # time.monotonic() at arrival
    cookie: str


class BehaviourServer:
    """An aiohttp low-level server on loopback that records every request."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1") -> None:
        self._handler = handler
        self._host = host
        self.arrivals: list[Arrival] = []
        self.port = 0
        self._runner: web.ServerRunner | None = None

    @property
    def origin(self) -> str:
        return f"http://{self._host}:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.origin + path

    def count(self, path: str, method: str | None = None) -> int:
        """Requests for ``path`` (with its query), of one method or all."""
        return sum(
            1 for a in self.arrivals if a.path == path and (method is None or a.method == method)
        )

    def methods(self) -> Counter[str]:
        return Counter(a.method for a in self.arrivals)

    async def start(self) -> Self:
        runner = web.ServerRunner(web.Server(self._handle, access_log=None))
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, self._host, 0)
        await site.start()
        self.port = runner.addresses[0][1]
        return self

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        self.arrivals.append(
            Arrival(
                request.method, request.path_qs, time.monotonic(), request.headers.get("Cookie", "")
            )
        )
        return await self._handler(request)


def html(*links: str, images: tuple[str, ...] = ()) -> web.Response:
    """A page linking to ``links`` (``<a>``: pages in scope) and showing ``images`` (checked)."""
    body = "".join(f'<a href="{link}">{link}</a>\n' for link in links)
    body += "".join(f'<img src="{src}">\n' for src in images)
    return web.Response(
        text=f"<!doctype html><html><body>{body}</body></html>", content_type="text/html"
    )


def lying_head(head: dict[str, int], get: dict[str, int], links: list[str]) -> Handler:
    """``/`` shows ``links`` as images (checked, not crawled); other paths answer
    HEAD and GET with their own statuses."""

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        if request.path == "/":
            return html(images=tuple(links))
        statuses = head if request.method == "HEAD" else get
        status = statuses.get(request.path, 404)
        return web.Response(status=status, body=b"x" * 10_000, content_type="image/png")

    return handle


def has_session(request: web.BaseRequest) -> bool:
    return request.cookies.get(SESSION) == SESSION_VALUE


def cookie_gate(
    pages: int, *, redirect_loop: bool = False, delay_s: float = 0.0, entry_delay_s: float = 0.0
) -> Handler:
    """``/`` sets the session cookie and links to ``/p/0`` … ``/p/{pages-1}``, each
    linking to the next; without the cookie a page answers 403, or with
    ``redirect_loop`` redirects to ``/consent``, which redirects back (setting
    the cookie only for a client that keeps it). Every answer waits ``delay_s``,
    the entry page ``entry_delay_s`` more."""

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        if delay_s:
            await asyncio.sleep(delay_s)
        path = request.path
        if path == "/" and entry_delay_s:
            await asyncio.sleep(entry_delay_s)
        if path == "/":
            response = html(*(f"/p/{i}" for i in range(min(pages, 2))))
            response.set_cookie(SESSION, SESSION_VALUE, path="/", max_age=3600, httponly=True)
            return response
        if path == "/consent":
            response = web.Response(
                status=302, headers={"Location": request.query.get("next", "/")}
            )
            response.set_cookie(SESSION, SESSION_VALUE, path="/")
            return response
        if not has_session(request):
            if redirect_loop:
                return web.Response(status=302, headers={"Location": f"/consent?next={path}"})
            return web.Response(status=403, text="no session")
        if path.startswith("/p/"):
            i = int(path.rsplit("/", 1)[1])
            return html(*(f"/p/{j}" for j in (2 * i + 2, 2 * i + 3) if j < pages))
        return web.Response(status=404)

    return handle


class UntypedServer(BehaviourServer):
    """``/`` is an HTML page sent without any Content-Type (aiohttp's server would
    add one, so this answers on a raw socket); ``/gone*`` is 404, the rest 200."""

    def __init__(self, links: list[str], host: str = "127.0.0.1") -> None:
        super().__init__(self._unused, host)
        self._links = links
        self._server: asyncio.Server | None = None

    async def start(self) -> Self:
        self._server = await asyncio.start_server(self._serve, self._host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.close()
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, path, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            self.arrivals.append(Arrival(method, path, time.monotonic(), ""))
            if path == "/":
                links = "".join(f'<a href="{link}">x</a>' for link in self._links)
                body = f"\n  <!DOCTYPE html><html><body>{links}</body></html>".encode()
                status, headers = "200 OK", b""
            elif path.startswith("/gone"):
                body, status, headers = b"", "404 Not Found", b""
            else:
                body, status, headers = b"ok", "200 OK", b"Content-Type: text/plain\r\n"
            writer.write(
                f"HTTP/1.1 {status}\r\n".encode()
                + headers
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + (body if method != "HEAD" else b"")
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _unused(request: web.BaseRequest) -> web.StreamResponse:
        raise AssertionError("UntypedServer answers on its own socket")


class ThreadedBehaviour:
    """A BehaviourServer on a background thread's event loop; a (sync) context manager."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.server = BehaviourServer(handler, host)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(START_TIMEOUT_S)

    def __enter__(self) -> BehaviourServer:
        self._thread.start()
        try:
            self._call(self.server.start())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.server

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._thread.is_alive():
            self._call(self.server.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(START_TIMEOUT_S)
        if not self._loop.is_closed():
            self._loop.close()
