"""Keeping this process's cookie jar and the crawl's stored cookies in step.

A resumed run and every worker of a crawl must send what the site set, so
the jar (``crawler.net.jar.Jar``) is stored with the crawl:

- at start, every stored cookie goes into the jar (``load``);
- before each group commit, the cookies responses changed are stored first
  (``flush``): no worker can lease a page's children before the cookies set
  with that page are readable;
- each lease reads the cookies stored since the last look (``since``, in the
  store's lease call: ``LeaseAsk.cookies_since``), merged here (``merge``),
  looking back ``OVERLAP_S`` more for commits that took a while and for
  clocks that differ between machines.
"""

from __future__ import annotations

import time

from crawler.models import Cookie
from crawler.net.jar import Jar
from crawler.store.contract import FrontierStore

OVERLAP_S = 30.0


class CookieSync:
    """The jar of one process and the store of one crawl (see module docstring)."""

    def __init__(self, jar: Jar, frontier: FrontierStore) -> None:
        self._jar = jar
        self._frontier = frontier
        self._looked_at: float | None = None

    async def load(self) -> None:
        """Every cookie the crawl stored (a resumed run, a new worker)."""
        now = time.time()
        self._jar.merge(await self._frontier.get_cookies(None), now)
        self._looked_at = now

    def since(self) -> float:
        """Where the next look starts: the last one's time, less the overlap."""
        return (self._looked_at or 0.0) - OVERLAP_S

    def merge(self, found: list[Cookie], looked_at: float) -> None:
        """The cookies a lease read, from ``since()`` as it was at ``looked_at``."""
        self._jar.merge(found, looked_at)
        self._looked_at = max(self._looked_at or 0.0, looked_at)

    async def flush(self) -> None:
        """Store what responses changed since the last flush."""
        changed = self._jar.take_changes()
        if changed:
            await self._frontier.put_cookies(changed, time.time())
