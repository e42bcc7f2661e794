"""robots.txt: fetched once per host and crawl, stored, and obeyed for crawling.

Only pages the crawl would parse are subject to its rules (checking that a
link answers is not crawling); the ``Crawl-delay`` of a host the crawl only
checks is honoured too, once it has a few links to check there
(``crawler.engine.checked_hosts``). A robots.txt that is missing (4xx) allows
everything; one that cannot be fetched (5xx, network error) also allows
everything, and says so in the log (as a warning, except for a host whose name
does not resolve: its links are reported broken). ``Crawl-delay`` becomes the host's
minimum interval; ``Sitemap:`` lines feed ``--use-sitemaps``.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

import structlog
from protego import Protego

from crawler.errors import FailureKind
from crawler.net.fetch import Fetcher
from crawler.store.contract import FrontierStore

log = structlog.get_logger(__name__)
CACHE_SIZE = 1000
MAX_ROBOTS_BYTES = 512 * 1024


class Robots:
    """robots.txt rules per host for one crawl."""

    def __init__(self, fetcher: Fetcher, frontier: FrontierStore, user_agent: str) -> None:
        self._fetcher = fetcher
        self._frontier = frontier
        self._agent = user_agent
        self._rules: OrderedDict[str, Protego] = OrderedDict()
        self._loading: dict[str, asyncio.Future[Protego]] = {}
        self.crawl_delays: dict[str, float] = {}

    async def allowed(self, url: str, host: str) -> bool:
        """May the crawl fetch ``url`` to parse it?"""
        rules = await self.rules(url, host)
        return bool(rules.can_fetch(url, self._agent))

    async def sitemaps(self, url: str, host: str) -> list[str]:
        """The sitemaps ``host``'s robots.txt lists."""
        rules = await self.rules(url, host)
        return list(rules.sitemaps)

    async def rules(self, url: str, host: str) -> Protego:
        """The parsed robots.txt of ``host`` (loaded once, shared by concurrent callers)."""
        rules = self._rules.get(host)
        if rules is not None:
            self._rules.move_to_end(host)
            return rules
        pending = self._loading.get(host)
        if pending is not None:
            return await pending
        future: asyncio.Future[Protego] = asyncio.get_running_loop().create_future()
        self._loading[host] = future
        try:
            rules = await self._load(url, host)
            future.set_result(rules)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters re-raise it
            raise
        finally:
            del self._loading[host]
        self._rules[host] = rules
        if len(self._rules) > CACHE_SIZE:
            self._rules.popitem(last=False)
        return rules

    async def _load(self, url: str, host: str) -> Protego:
        stored = await self._frontier.get_robots(host)
        if stored is None:
            origin = url[: url.index("/", url.index("//") + 2)]
            fetched = await self._fetcher.fetch_text(origin + "/robots.txt")
            status = fetched.status if fetched.failure is None else None
            body = ""
            if status is not None and 200 <= status < 300 and fetched.body:
                body = fetched.body[:MAX_ROBOTS_BYTES].decode("utf-8", "replace")
            elif fetched.failure is FailureKind.DNS:
                # Every link to the host fails the same way and is reported broken:
                # a warning per missing host would only repeat the report.
                log.info("robots_host_unknown", host=host, error=fetched.error)
            elif status is None or status >= 500:
                log.warning("robots_unavailable", host=host, error=fetched.error, status=status)
            now = time.time()
            await self._frontier.put_robots(host, status, body, now)
        else:
            body = stored[1]
        rules = Protego.parse(body)
        delay = rules.crawl_delay(self._agent)
        if delay:
            self.crawl_delays[host] = float(delay)
        return rules
