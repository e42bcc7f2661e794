"""Headless Chromium driven over the Chrome DevTools Protocol, with aiohttp's websocket.

Enough to test a page as a person uses it: open it, run JavaScript in it
(fill a form, click), wait for a condition, take a screenshot. No dependency
beyond aiohttp and Debian's ``chromium``::

    async with Browser(tmp_path) as browser:
        page = await browser.new_page()
        await page.goto("http://127.0.0.1:8080/")
        title = await page.eval("document.title")
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiohttp

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
)
# A bound, not a speed: a cold start reads chromium's ~200 MB from a disk
# that, on a busy CI machine, took over 20 s.
START_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 15.0


def chromium_path() -> str | None:
    """Debian's chromium, if installed (``apt-get install chromium``)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _read_lines(path: Path) -> list[str]:
    """Chromium writes DevToolsActivePort as "PORT\nPATH" once it listens."""
    try:
        return path.read_text().split()
    except FileNotFoundError:
        return []


class CDPError(RuntimeError):
    """The browser answered a command with an error, or a script threw."""


class Browser:
    """One headless Chromium process and its DevTools websocket."""

    def __init__(self, workdir: Path, executable: str | None = None) -> None:
        self._workdir = workdir
        self._executable = executable or chromium_path()
        self._process: subprocess.Popen[bytes] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._listeners: list[tuple[str, str | None, asyncio.Future[dict[str, Any]]]] = []

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        if self._executable is None:
            raise RuntimeError("no chromium: apt-get install chromium")
        profile = self._workdir / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        log = (self._workdir / "chromium.log").open("wb")
        with log:
            self._process = subprocess.Popen(  # noqa: ASYNC220 - returns at once
                [self._executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env={**os.environ, "HOME": str(self._workdir)},
            )
        url = await self._devtools_url(profile / "DevToolsActivePort")
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(url, max_msg_size=0)
        self._reader = asyncio.create_task(self._read())

    async def _devtools_url(self, port_file: Path) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self._process.returncode}")
            lines = await asyncio.to_thread(_read_lines, port_file)
            if len(lines) >= 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            await asyncio.sleep(0.02)
        raise RuntimeError("chromium did not open its DevTools port")

    async def _read(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
                continue
            for listener in list(self._listeners):
                method, session_id, future = listener
                if data.get("method") == method and data.get("sessionId") == session_id:
                    self._listeners.remove(listener)
                    if not future.done():
                        future.set_result(data.get("params", {}))

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """One CDP command; its result, or CDPError."""
        assert self._ws is not None
        message_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[message_id] = future
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        await self._ws.send_str(json.dumps(message))
        answer = await asyncio.wait_for(future, CALL_TIMEOUT_S)
        if "error" in answer:
            raise CDPError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def expect(self, method: str, session_id: str | None) -> asyncio.Future[dict[str, Any]]:
        """A future for the next event ``method`` of a session (register before causing it)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._listeners.append((method, session_id, future))
        return future

    async def new_page(self) -> Page:
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        attached = await self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        page = Page(self, attached["sessionId"])
        await page.send("Page.enable")
        await page.send("Runtime.enable")
        return page

    async def close(self) -> None:
        if self._ws is not None and not self._ws.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.send("Browser.close"), 5)
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        if self._process is not None:
            try:
                await asyncio.to_thread(self._process.wait, 10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                await asyncio.to_thread(self._process.wait, 10)


class Page:
    """One tab, through its flat CDP session."""

    def __init__(self, browser: Browser, session_id: str) -> None:
        self._browser = browser
        self.session_id = session_id

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._browser.send(method, params, self.session_id)

    async def goto(self, url: str) -> None:
        loaded = self._browser.expect("Page.loadEventFired", self.session_id)
        result = await self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise CDPError(f"cannot open {url}: {result['errorText']}")
        await asyncio.wait_for(loaded, CALL_TIMEOUT_S)

    async def eval(self, expression: str) -> Any:
        """Evaluate JavaScript in the page; its value (JSON-able), or CDPError if it throws."""
        result = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CDPError(f"{expression[:80]!r} threw: {text}")
        return result.get("result", {}).get("value")

    async def wait_for(self, expression: str, timeout: float = 20.0) -> Any:  # noqa: ASYNC109
        """Evaluate until the value is truthy; return it."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.eval(expression)
            if value:
                return value
            if time.monotonic() >= deadline:
                raise AssertionError(f"not true within {timeout}s: {expression}")
            await asyncio.sleep(0.05)

    async def screenshot(self, path: Path) -> None:
        shot = await self.send("Page.captureScreenshot", {"format": "png"})
        await asyncio.to_thread(path.write_bytes, base64.b64decode(shot["data"]))
