"""Rendering one page: load it in a tab, answer its requests, wait until it settles, take its DOM.

The page is never fetched twice: the document the crawl already fetched is
handed to the browser (``Fetch.fulfillRequest``). Every other request the
page makes is paused (``Fetch.requestPaused``) and answered by the crawl's
own fetcher through ``load``, so it passes the same politeness gate, address
guard, headers, cookies and user agent as any request of the crawl; what the
fetcher refuses never leaves the machine. Images, media and fonts are
refused unless asked for; so are methods other than GET and HEAD (a link
checker does not post forms) and navigations away from the page.

"Settled" means loaded, then no request in flight for ``IDLE_S``; a page
still busy at the deadline is recorded as ``not_settled`` and its DOM taken
as it is. Script errors, console errors and failed requests are recorded as
``RenderIssue`` rows.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from crawler.errors import FailureKind
from crawler.fetch_types import Fetched
from crawler.models import RenderIssue
from crawler.net import storable
from crawler.net.render.cdp import BrowserGoneError, CDPError, Connection

IDLE_S = 0.5
DOM_TIMEOUT_S = 5.0
MAX_ISSUES = 50  # per page: a script that logs in a loop records no more
MAX_MESSAGE_CHARS = 500
BLOCKED_TYPES = frozenset({"Image", "Media", "Font"})
SENT_METHODS = frozenset({"GET", "HEAD"})
# What the browser is told of a response (enough for scripts, CORS and redirects).
PASSED_HEADERS = (
    "content-type",
    "location",
    "access-control-allow-origin",
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-expose-headers",
)
# Request headers a script may set that change the answer; the rest are the crawl's.
FORWARDED_HEADERS = frozenset({"accept", "content-type", "x-requested-with"})
_DOM = (
    "({html: document.documentElement ? document.documentElement.outerHTML : '',"
    " url: location.href})"
)

Load = Callable[[str, str, dict[str, str]], Awaitable[Fetched]]


class PageCrashedError(BrowserGoneError):
    """The tab's renderer crashed (or stopped answering) while the page loaded."""


@dataclass(slots=True)
class Rendered:
    """What rendering found: the DOM as HTML (None when it could not be read), and the issues."""

    html: str | None
    url: str  # location.href when the DOM was taken (pushState may have changed it)
    settled: bool
    issues: list[RenderIssue] = field(default_factory=list)


async def render_page(
    conn: Connection,
    url: str,
    document: Fetched,
    load: Load,
    *,
    timeout_s: float,
    block_media: bool = True,
) -> Rendered:
    """Load ``url`` (answered with ``document``) in a new tab; its settled DOM and issues."""
    target = await conn.send("Target.createTarget", {"url": "about:blank"})
    target_id = target["targetId"]
    run: _PageRun | None = None
    try:
        attached = await conn.send(
            "Target.attachToTarget", {"targetId": target_id, "flatten": True}
        )
        run = _PageRun(conn, attached["sessionId"], target_id, document, load, block_media)
        return await run.render(url, timeout_s)
    finally:
        if run is not None:
            await run.stop()
        with contextlib.suppress(CDPError, TimeoutError):
            await conn.send("Target.closeTarget", {"targetId": target_id}, timeout_s=5)


class _PageRun:
    """The state of one tab while it renders; its event handler."""

    def __init__(
        self,
        conn: Connection,
        session_id: str,
        target_id: str,
        document: Fetched,
        load: Load,
        block_media: bool,
    ) -> None:
        self._conn = conn
        self._session = session_id
        self._main_frame = target_id  # a page target's main frame has the target's id
        self._document = document
        self._load = load
        self._block_media = block_media
        self._served = False
        self._loaded = asyncio.Event()
        self._activity = asyncio.Event()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._crashed = False
        self.issues: list[RenderIssue] = []
        conn.on(session_id, self._on_event)

    async def render(self, url: str, timeout_s: float) -> Rendered:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        send = self._send
        await send("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]})
        await send("Page.enable")
        await send("Runtime.enable")
        navigated = await send("Page.navigate", {"url": url})
        if navigated.get("errorText") and not self._served:
            self._issue("render_failed", f"navigation failed: {navigated['errorText']}")
            return Rendered(None, url, settled=False, issues=self.issues)
        settled = await self._settle(deadline)
        if not settled:
            self._issue("not_settled", f"still loading after {timeout_s:g}s; the DOM taken then")
        try:
            value = await self._evaluate(_DOM)
        except (TimeoutError, CDPError) as exc:
            if isinstance(exc, BrowserGoneError) or self._crashed:
                raise PageCrashedError(str(exc)) from exc
            self._issue("not_settled", "the page did not answer (a script busy in a loop?)")
            return Rendered(None, url, settled=False, issues=self.issues)
        html, where = str(value.get("html") or ""), str(value.get("url") or url)
        return Rendered(html, where, settled, self.issues)

    async def stop(self) -> None:
        self._conn.off(self._session)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        if self._crashed:
            raise PageCrashedError(f"{method}: the page crashed")
        return await self._conn.send(method, params, self._session)

    async def _evaluate(self, expression: str) -> dict[str, Any]:
        result = await self._conn.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            self._session,
            timeout_s=DOM_TIMEOUT_S,
        )
        value = result.get("result", {}).get("value")
        return value if isinstance(value, dict) else {}

    async def _settle(self, deadline: float) -> bool:
        """Loaded, then no request in flight for IDLE_S; False at the deadline."""
        loop = asyncio.get_running_loop()
        while True:
            if self._crashed:
                raise PageCrashedError("the page crashed while loading")
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            quiet = self._loaded.is_set() and self._in_flight == 0
            self._activity.clear()
            try:
                await asyncio.wait_for(
                    self._activity.wait(), min(IDLE_S, remaining) if quiet else remaining
                )
            except TimeoutError:
                if quiet and remaining >= IDLE_S:  # a whole idle window, not the deadline
                    return True

    # -- events --------------------------------------------------------------

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Fetch.requestPaused":
            self._paused(params)
        elif method == "Page.loadEventFired":
            self._loaded.set()
            self._activity.set()
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            self._issue("script_error", str(text), details.get("url") or None)
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            args = params.get("args", [])
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in args)
            self._issue("console_error", text)
        elif method in ("Inspector.targetCrashed", "Connection.gone"):
            self._crashed = True
            self._activity.set()

    def _paused(self, params: dict[str, Any]) -> None:
        request_id = params["requestId"]
        request = params.get("request", {})
        url, method = request.get("url", ""), request.get("method", "GET")
        kind = params.get("resourceType", "")
        if kind == "Document" and not self._served and params.get("frameId") == self._main_frame:
            self._served = True
            self._fulfill(request_id, self._document, url)
            return
        if kind == "Document" and params.get("frameId") == self._main_frame:
            self._fail(request_id, "Aborted")  # a script navigating away: not followed
            return
        if (kind in BLOCKED_TYPES and self._block_media) or (
            kind == "Other" and url.endswith("/favicon.ico")  # the browser's own, not the page's
        ):
            self._fail(request_id, "BlockedByClient")
            return
        if method not in SENT_METHODS:
            self._issue("request_refused", f"{method} not sent (only GET and HEAD are)", url)
            self._fail(request_id, "BlockedByClient")
            return
        headers = {
            name: value
            for name, value in request.get("headers", {}).items()
            if name.lower() in FORWARDED_HEADERS
        }
        task = asyncio.create_task(self._answer(request_id, url, method, headers))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(
        self, request_id: str, url: str, method: str, headers: dict[str, str]
    ) -> None:
        self._in_flight += 1
        self._activity.set()
        try:
            fetched = await self._load(url, method, headers)
            if fetched.failure == FailureKind.PRIVATE_ADDRESS:
                self._issue("request_refused", fetched.error or "private address", url)
                self._fail(request_id, "BlockedByClient")
            elif fetched.failure is not None:
                self._issue("request_failed", fetched.error or str(fetched.failure), url)
                self._fail(request_id, "Failed")
            else:
                if (fetched.status or 0) >= 400:
                    self._issue("request_failed", f"HTTP {fetched.status}", url)
                self._fulfill(request_id, fetched, url)
        finally:
            self._in_flight -= 1
            self._activity.set()

    def _fulfill(self, request_id: str, fetched: Fetched, url: str) -> None:
        headers = [{"name": "content-type", "value": fetched.content_type or "text/plain"}]
        headers += [
            {"name": name, "value": value}
            for name, value in fetched.headers.items()
            if name in PASSED_HEADERS and name != "content-type"
        ]
        if fetched.location:
            headers.append({"name": "location", "value": fetched.location})
        params = {
            "requestId": request_id,
            "responseCode": fetched.status or 200,
            "responseHeaders": headers,
            "body": base64.b64encode(fetched.body or b"").decode("ascii"),
        }
        self._conn.notify("Fetch.fulfillRequest", params, self._session)

    def _fail(self, request_id: str, reason: str) -> None:
        params = {"requestId": request_id, "errorReason": reason}
        self._conn.notify("Fetch.failRequest", params, self._session)

    def _issue(self, kind: str, message: str, url: str | None = None) -> None:
        if len(self.issues) < MAX_ISSUES:
            # A script's message may hold what no store keeps in a text (NUL, a lone surrogate).
            kept = storable.text(message[:MAX_MESSAGE_CHARS]) or ""
            self.issues.append(RenderIssue(kind, kept, storable.text(url)))
