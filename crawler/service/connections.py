"""Slow clients dropped: a deadline for a connection's first request, and a cap on connections.

aiohttp's server holds a connection as long as its client keeps it open: a
thousand clients that send half a request line each hold a thousand file
descriptors, and under a 1,024 limit ``/healthz`` stops answering. Here:

- a connection that has not sent a whole request head within
  ``read_timeout_s`` is closed (later requests on a kept-alive connection are
  bounded by aiohttp's keep-alive timeout, set to the same value; a body is
  read with the same bound by the handler that reads one);
- past ``max_connections``, the oldest connection that has not sent a request
  yet is closed to make room (else the new one is): an idle crowd cannot keep
  a probe or an operator out.

Installed on the aiohttp ``Server`` by wrapping its ``connection_made`` and
``connection_lost``, the two calls every connection makes to its manager.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = structlog.get_logger(__name__)


def _requests(handler: RequestHandler) -> int:
    # aiohttp counts the request heads a connection has sent; 1 if it does not say.
    return int(getattr(handler, "_request_count", 1))


class ConnectionGuard:
    """Deadlines and a cap for the connections of one aiohttp ``Server``."""

    def __init__(self, server: web.Server, *, max_connections: int, read_timeout_s: float):
        self._server = server
        self._max = max_connections
        self._timeout = read_timeout_s
        self._open: dict[RequestHandler, asyncio.TimerHandle] = {}
        self._made: Callable[..., Any] = server.connection_made
        self._lost: Callable[..., Any] = server.connection_lost
        server.connection_made = self._connection_made  # type: ignore[method-assign]
        server.connection_lost = self._connection_lost  # type: ignore[method-assign]
        self.dropped = 0

    def _connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        self._made(handler, transport)
        loop = asyncio.get_running_loop()
        self._open[handler] = loop.call_later(self._timeout, self._expire, handler)
        if len(self._open) > self._max:
            idle = next((h for h in self._open if _requests(h) == 0 and h is not handler), None)
            self._drop(idle or handler, "connection_limit")

    def _connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        timer = self._open.pop(handler, None)
        if timer is not None:
            timer.cancel()
        self._lost(handler, exc)

    def _expire(self, handler: RequestHandler) -> None:
        if handler in self._open and _requests(handler) == 0:
            self._drop(handler, "read_timeout")

    def _drop(self, handler: RequestHandler, reason: str) -> None:
        timer = self._open.pop(handler, None)
        if timer is not None:
            timer.cancel()
        self.dropped += 1
        peer = handler.transport.get_extra_info("peername") if handler.transport else None
        log.debug("connection_dropped", reason=reason, client=str(peer[0]) if peer else None)
        handler.force_close()
