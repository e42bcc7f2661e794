"""A Chrome DevTools Protocol connection: commands with answers, events per session.

One websocket to the browser (``/devtools/browser/...``); pages are driven
through flat sessions (``Target.attachToTarget`` with ``flatten``), so every
message carries its ``sessionId``. A command waits for its answer with a
bound; when the websocket closes (the browser crashed or was killed) every
waiting command fails at once with ``BrowserGoneError``, so nothing hangs on
a dead browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any

from crawler.net.aio_client import aiohttp

CALL_TIMEOUT_S = 15.0
EventHandler = Callable[[str, dict[str, Any]], None]


class CDPError(RuntimeError):
    """The browser answered a command with an error."""


class BrowserGoneError(CDPError):
    """The browser's websocket closed: it crashed, was killed or restarted."""


class Connection:
    """One DevTools websocket; an event handler per session."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._session = session
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._handlers: dict[str | None, EventHandler] = {}
        self._reader = asyncio.create_task(self._read(), name="cdp-reader")
        self.gone = asyncio.Event()

    @classmethod
    async def open(cls, url: str) -> Connection:
        """Connect to the browser's DevTools websocket ``url``."""
        session = aiohttp.ClientSession()
        try:
            ws = await session.ws_connect(url, max_msg_size=0, autoping=True)
        except BaseException:
            await session.close()
            raise
        return cls(session, ws)

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session_id: str | None = None,
        *,
        timeout_s: float = CALL_TIMEOUT_S,
    ) -> dict[str, Any]:
        """One command; its result. CDPError for an error answer, BrowserGoneError, TimeoutError."""
        if self.gone.is_set():
            raise BrowserGoneError(f"{method}: the browser is gone")
        message_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[message_id] = future
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        try:
            await self._ws.send_str(json.dumps(message))
            answer = await asyncio.wait_for(future, timeout_s)
        except (ConnectionError, aiohttp.ClientError) as exc:
            raise BrowserGoneError(f"{method}: {exc}") from exc
        finally:
            self._pending.pop(message_id, None)
        if "error" in answer:
            raise CDPError(f"{method}: {answer['error'].get('message', answer['error'])}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def notify(self, method: str, params: dict[str, Any], session_id: str | None) -> None:
        """Send a command whose answer nobody waits for (answers to paused requests)."""
        if self.gone.is_set():
            return
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params}
        if session_id is not None:
            message["sessionId"] = session_id
        task = asyncio.ensure_future(self._ws.send_str(json.dumps(message)))
        task.add_done_callback(_ignore_result)

    def on(self, session_id: str | None, handler: EventHandler) -> None:
        """Route the events of ``session_id`` (None: the browser's) to ``handler``."""
        self._handlers[session_id] = handler

    def off(self, session_id: str | None) -> None:
        self._handlers.pop(session_id, None)

    async def close(self) -> None:
        """Close the websocket (the browser keeps running)."""
        with contextlib.suppress(Exception):
            await self._ws.close()
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        await self._session.close()
        self._fail_pending()

    async def _read(self) -> None:
        try:
            async for message in self._ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    continue
                data = json.loads(message.data)
                if "id" in data:
                    future = self._pending.get(data["id"])
                    if future is not None and not future.done():
                        future.set_result(data)
                    continue
                handler = self._handlers.get(data.get("sessionId"))
                if handler is not None:
                    handler(data.get("method", ""), data.get("params", {}))
        finally:
            self._fail_pending()

    def _fail_pending(self) -> None:
        self.gone.set()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(BrowserGoneError("the browser closed its connection"))
        self._pending.clear()
        for handler in list(self._handlers.values()):
            with contextlib.suppress(Exception):
                handler("Connection.gone", {})


def _ignore_result(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a closed socket is noticed by the reader
