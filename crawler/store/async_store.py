"""The one writer: every frontier call runs on a single dedicated thread.

aiosqlite would hop threads once per statement; a group commit here is one
hop for the whole batch (BEGIN, the upserts, the results, COMMIT), which is
what keeps the event loop free and the writes batched.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import sqlite3
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from crawler.models import Counts, Discovered, LeasedUrl, Outcome
from crawler.store import crawls, hostdata
from crawler.store.frontier import Frontier

P = ParamSpec("P")
T = TypeVar("T")


class AsyncFrontier:
    """``Frontier``'s contract, awaitable; calls are serialized on one thread."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        crawl_id: int,
        *,
        max_urls: int | None = None,
        max_cache_age_s: float | None = None,
    ) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="crawler-writer"
        )
        self._conn = conn
        self.sync = Frontier(conn, crawl_id, max_urls=max_urls, max_cache_age_s=max_cache_age_s)
        self.crawl_id = crawl_id

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def enqueue(self, seeds: Sequence[Discovered], now: float) -> int:
        return await self._run(self.sync.enqueue, seeds, now)

    async def lease(self, owner: str, limit: int, ttl_s: float, now: float) -> list[LeasedUrl]:
        return await self._run(self.sync.lease, owner, limit, ttl_s, now)

    async def renew(self, owner: str, ttl_s: float, now: float) -> int:
        return await self._run(self.sync.renew, owner, ttl_s, now)

    async def complete(self, owner: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        return await self._run(self.sync.complete, owner, outcomes, now)

    async def release(self, owner: str) -> int:
        return await self._run(self.sync.release, owner)

    async def reclaim(self, now: float, stale_after_s: float) -> int:
        return await self._run(self.sync.reclaim, now, stale_after_s)

    async def finish_if_quiescent(self, now: float) -> bool:
        return await self._run(self.sync.finish_if_quiescent, now)

    async def register_worker(self, owner: str, now: float) -> None:
        await self._run(self.sync.register_worker, owner, now)

    async def next_wake_at(self) -> float | None:
        return await self._run(self.sync.next_wake_at)

    async def counts(self) -> Counts:
        return await self._run(self.sync.counts)

    async def checkpoint(self) -> None:
        await self._run(self.sync.checkpoint)

    async def bound_wal(self, limit_bytes: int) -> bool:
        return await self._run(self.sync.bound_wal, limit_bytes)

    async def add_elapsed(self, seconds: float) -> None:
        await self._run(crawls.add_elapsed, self._conn, self.crawl_id, seconds)

    async def get_robots(self, host: str) -> tuple[int | None, str] | None:
        return await self._run(hostdata.get_robots, self._conn, self.crawl_id, host)

    async def put_robots(self, host: str, status: int | None, body: str, now: float) -> None:
        await self._run(hostdata.put_robots, self._conn, self.crawl_id, host, status, body, now)

    def close(self) -> None:
        """Stop the writer thread and close the connection."""
        self._executor.shutdown(wait=True)
        self._conn.close()
