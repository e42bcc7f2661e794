"""Politeness to hosts the crawl only checks: their robots.txt's Crawl-delay.

A docs site may link to thousands of pages of an API reference on another
host. That host is never crawled, so its ``Disallow`` rules do not apply
(checking that a link answers is not crawling), but its ``Crawl-delay`` does:
once this process has more than ``DEFAULT_CHECKED_HOST_ROBOTS_AFTER`` URLs to
check on a host, its robots.txt is read (once, stored with the crawl as for
crawled hosts), and the host's requests wait for it meanwhile. A host with a
few links only is never asked for robots.txt, nor is a crawled host here:
its pages read robots.txt anyway.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterable

import structlog

from crawler.config import DEFAULT_CHECKED_HOST_ROBOTS_AFTER
from crawler.models import LeasedUrl, UrlKind
from crawler.net.robots import Robots

log = structlog.get_logger(__name__)
# Hosts counted (or known) at once; the least recently seen are forgotten past it.
MAX_HOSTS = 100_000


class CheckedHosts:
    """Counts leased checks per host and reads robots.txt past the threshold."""

    def __init__(
        self,
        robots: Robots,
        wake: Callable[[], None],
        is_crawled: Callable[[str, str], bool],
        after: int = DEFAULT_CHECKED_HOST_ROBOTS_AFTER,
    ) -> None:
        self._robots = robots
        self._wake = wake
        self._is_crawled = is_crawled  # (url, host): its pages read robots.txt anyway
        self._after = after
        self._counts: OrderedDict[str, int] = OrderedDict()  # -1: robots.txt read
        self._loading: dict[str, asyncio.Task[None]] = {}

    def note(self, rows: Iterable[LeasedUrl]) -> None:
        """Count the leased checks (and anchor fetches); read robots.txt past the threshold."""
        for row in rows:
            host = row.host
            if row.kind == UrlKind.PAGE or not host or host in self._loading:
                continue
            if self._is_crawled(row.url, host):
                continue
            count = self._counts.get(host, 0)
            if count < 0:
                continue
            self._counts[host] = count + 1
            self._counts.move_to_end(host)
            if len(self._counts) > MAX_HOSTS:
                self._counts.popitem(last=False)
            if count + 1 > self._after:
                self._counts[host] = -1
                self._loading[host] = asyncio.create_task(self._load(row.url, host))

    def holds(self, host: str) -> bool:
        """Must ``host``'s requests wait (its robots.txt is being read)?"""
        return host in self._loading

    async def aclose(self) -> None:
        """Stop reading robots.txt files still on their way."""
        tasks = list(self._loading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _load(self, url: str, host: str) -> None:
        try:
            await self._robots.rules(url, host)
        except asyncio.CancelledError:
            raise
        except Exception:  # no Crawl-delay known: the host's limits stay as they are
            log.exception("robots_failed", host=host)
        finally:
            self._loading.pop(host, None)
            self._wake()
