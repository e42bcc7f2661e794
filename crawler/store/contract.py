"""The storage contract the engine, the runner and robots.txt handling rely on.

Everything above ``crawler/store`` talks to a ``FrontierStore`` and never to a
database driver, so a second backend (PostgreSQL, for many workers on many
machines) is one more implementation of this protocol. ``AsyncFrontier`` is
the SQLite one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from crawler.models import Cookie, Counts, Discovered, LeasedUrl, Outcome
from crawler.politeness import Gate, Limits


class FrontierStore(Protocol):
    """Frontier, visited set, quiescence and the per-crawl facts, for one crawl.

    Each call is one transaction. See ``crawler.store.frontier.Frontier`` for
    the semantics every backend must keep.
    """

    crawl_id: int

    async def enqueue(self, seeds: Sequence[Discovered], now: float) -> int: ...

    async def lease(self, owner: str, limit: int, ttl_s: float, now: float) -> list[LeasedUrl]: ...

    async def renew(self, owner: str, ttl_s: float, now: float) -> int: ...

    async def complete(self, owner: str, outcomes: Sequence[Outcome], now: float) -> list[bool]: ...

    async def release(self, owner: str) -> int: ...

    async def reclaim(self, now: float, stale_after_s: float) -> int: ...

    async def finish_if_quiescent(self, now: float) -> bool: ...

    async def register_worker(self, owner: str, now: float) -> None: ...

    async def next_wake_at(self) -> float | None: ...

    async def counts(self) -> Counts: ...

    async def add_elapsed(self, seconds: float) -> None: ...

    async def get_robots(self, host: str) -> tuple[int | None, str] | None: ...

    async def put_robots(self, host: str, status: int | None, body: str, now: float) -> None: ...

    # The crawl's cookie jar (``crawler.net.cookies``): ``put_cookies`` upserts by
    # (domain, path, name) and stamps ``now``; an expired cookie is a deletion,
    # kept so other workers learn of it; at most DEFAULT_MAX_COOKIES_PER_HOST
    # per domain, live ones first. ``get_cookies`` returns those stamped at or
    # after ``since`` (every one when None).
    async def put_cookies(self, changed: Sequence[Cookie], now: float) -> None: ...

    async def get_cookies(self, since: float | None = None) -> list[Cookie]: ...

    # Hosts with a result whose HEAD status a confirming GET overruled.
    async def head_unreliable_hosts(self) -> list[str]: ...

    def host_gate(
        self, owner: str, limits: Limits, ttl_s: float, wake: Callable[[], None]
    ) -> Gate: ...

    def stopping(self) -> None: ...

    def close(self) -> None: ...
