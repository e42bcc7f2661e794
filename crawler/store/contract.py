"""The storage contract the engine, the runner and robots.txt handling rely on.

Everything above ``crawler/store`` talks to a ``FrontierStore`` and never to a
database driver, so a second backend (PostgreSQL, for many workers on many
machines) is one more implementation of this protocol. ``AsyncFrontier`` is
the SQLite one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from crawler.models import Counts, Discovered, LeasedUrl, Outcome
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

    async def is_seeded(self) -> bool:
        """Does the frontier hold everything the crawl starts from?

        The seeds enter it in the transaction that records the crawl
        (``open.create_crawl``); the pages its sitemaps list only once a run
        has collected them. Until then a run enqueues the recorded seeds
        again (idempotent: a crawl recorded by an older version may have
        none) and collects the sitemaps before it crawls.
        """
        ...

    async def mark_seeded(self, now: float) -> None:
        """Record that the seeds and the sitemaps' pages are in the frontier."""
        ...

    async def add_elapsed(self, seconds: float) -> None: ...

    async def get_robots(self, host: str) -> tuple[int | None, str] | None: ...

    async def put_robots(self, host: str, status: int | None, body: str, now: float) -> None: ...

    def host_gate(
        self, owner: str, limits: Limits, ttl_s: float, wake: Callable[[], None]
    ) -> Gate: ...

    def stopping(self) -> None: ...

    def close(self) -> None: ...
