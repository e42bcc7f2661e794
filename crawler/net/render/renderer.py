"""The bounded pool of rendering tabs, and the browser's life: start, restart, retry, stop.

At most ``concurrency`` pages render at once. The browser is restarted
before the next page once it has rendered ``restart_pages`` pages or its
processes' resident memory passes ``max_rss_bytes`` (checked every
``RSS_CHECK_PAGES`` pages): new pages wait while the pages still open on the
old browser finish, so two browsers never run at once and memory stays flat
over a long crawl. A browser that crashes, or a page that hangs past its
deadline, costs a restart and one retry of that page; a second failure is
recorded on the page (``render_failed``) and the crawl goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import structlog

from crawler.fetch_types import Fetched
from crawler.models import RenderIssue
from crawler.net.aio_client import aiohttp
from crawler.net.render import process
from crawler.net.render.cdp import BrowserGoneError, CDPError, Connection
from crawler.net.render.page import Load, Rendered, render_page

log = structlog.get_logger(__name__)

RSS_CHECK_PAGES = 10
HANG_GRACE_S = 15.0  # beyond --render-timeout: the browser no longer answers


@dataclass(frozen=True, slots=True)
class RenderLimits:
    """How the pool behaves (from the crawl's settings)."""

    timeout_s: float
    concurrency: int
    restart_pages: int
    max_rss_bytes: int
    block_media: bool = True


class _Browser:
    """A started browser and its connection."""

    def __init__(self, proc: process.BrowserProcess, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.pages = 0

    async def close(self) -> None:
        with contextlib.suppress(CDPError, TimeoutError):
            await self.conn.send("Browser.close", timeout_s=2)
        await self.conn.close()
        await asyncio.to_thread(self.proc.kill)


class Renderer:
    """Renders pages in one headless browser; an async context manager."""

    def __init__(self, executable: str, user_agent: str, limits: RenderLimits) -> None:
        self._executable = executable
        self._user_agent = user_agent
        self.limits = limits
        self._slots = asyncio.Semaphore(limits.concurrency)
        self._lock = asyncio.Lock()
        self._idle = asyncio.Condition()
        self._open = 0  # pages rendering on the current browser
        self._browser: _Browser | None = None
        self._restart_wanted = False
        self.restarts = 0
        self.rendered = 0
        self.peak_rss_bytes = 0

    async def __aenter__(self) -> Renderer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def browser_pid(self) -> int | None:
        return self._browser.proc.pid if self._browser is not None else None

    async def render(self, url: str, document: Fetched, load: Load) -> Rendered:
        """Render ``url`` (its document already fetched); retried once on a crash or hang."""
        async with self._slots:
            failure = ""
            for attempt in (1, 2):
                try:
                    browser = await self._checkout()
                except (OSError, RuntimeError, TimeoutError, aiohttp.ClientError) as exc:
                    failure = f"the browser did not start: {exc}"
                    log.warning("browser_start_failed", url=url, attempt=attempt, error=str(exc))
                    continue
                try:
                    return await asyncio.wait_for(
                        render_page(
                            browser.conn,
                            url,
                            document,
                            load,
                            timeout_s=self.limits.timeout_s,
                            block_media=self.limits.block_media,
                        ),
                        self.limits.timeout_s + HANG_GRACE_S,
                    )
                except (BrowserGoneError, TimeoutError) as exc:
                    failure = str(exc) or "the browser stopped answering"
                    log.warning("render_failed", url=url, attempt=attempt, error=failure)
                    self._restart_wanted = True
                except CDPError as exc:
                    failure = str(exc)
                    log.warning("render_failed", url=url, attempt=attempt, error=failure)
                finally:
                    await self._checkin(browser)
            issue = RenderIssue("render_failed", f"rendering failed twice: {failure}")
            return Rendered(None, url, settled=False, issues=[issue])

    async def aclose(self) -> None:
        """Stop the browser (its whole process group)."""
        async with self._lock:
            if self._browser is not None:
                await self._browser.close()
                self._browser = None

    # -- the browser's life ----------------------------------------------------

    async def _checkout(self) -> _Browser:
        async with self._lock:
            if self._browser is not None and self._needs_restart(self._browser):
                async with self._idle:
                    await self._idle.wait_for(lambda: self._open == 0)
                await self._browser.close()
                self._browser = None
                self.restarts += 1
            if self._browser is None:
                self._browser = await self._start()
                self._restart_wanted = False
            self._open += 1
            return self._browser

    async def _checkin(self, browser: _Browser) -> None:
        browser.pages += 1
        self.rendered += 1
        if browser.pages % RSS_CHECK_PAGES == 0:
            rss = await asyncio.to_thread(browser.proc.rss_bytes)
            self.peak_rss_bytes = max(self.peak_rss_bytes, rss)
            if rss > self.limits.max_rss_bytes:
                log.info("browser_over_rss", rss_bytes=rss, limit=self.limits.max_rss_bytes)
                self._restart_wanted = True
        async with self._idle:
            self._open -= 1
            self._idle.notify_all()

    def _needs_restart(self, browser: _Browser) -> bool:
        return (
            self._restart_wanted
            or browser.pages >= self.limits.restart_pages
            or browser.conn.gone.is_set()
            or not browser.proc.is_running()
        )

    async def _start(self) -> _Browser:
        proc = process.BrowserProcess(self._executable, self._user_agent)
        proc.launch()  # on this thread: the death signal follows the forking thread
        try:
            url = await asyncio.to_thread(process.wait_for_start, proc)
            conn = await Connection.open(url)
        except BaseException:
            await asyncio.to_thread(proc.kill)
            raise
        log.info("browser_started", pid=proc.pid)
        return _Browser(proc, conn)
