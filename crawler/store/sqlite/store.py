"""The one writer: every frontier call runs on a single dedicated thread.

aiosqlite would hop threads once per statement; a group commit here is one
hop for the whole batch (BEGIN, the upserts, the results, COMMIT), which is
what keeps the event loop free and the writes batched.

A re-crawl's reads of the previous crawl (``previous_pages``) run on a
read-only connection of their own thread: that crawl is finished and never
written, and the writer thread stays free for the group commits.

The WAL is this backend's own concern, kept here: a passive checkpoint with
every lease renewal, and commits held back while a long reader's snapshot
keeps the log from being reset past ``WAL_LIMIT_BYTES`` (``complete``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

import structlog

from crawler.models import (
    Cookie,
    Counts,
    Discovered,
    LeaseAsk,
    LeasedUrl,
    LeaseGrant,
    Outcome,
    PreviousPage,
    UrlKind,
)
from crawler.politeness import Gate, HostGate, Limits
from crawler.store.sqlite import cookies, crawls, db, hostdata, recrawl
from crawler.store.sqlite.frontier import Frontier

log = structlog.get_logger(__name__)
P = ParamSpec("P")
# The WAL stays under this, readers or not: a few checkpoint intervals.
WAL_LIMIT_BYTES = 4 * db.AUTOCHECKPOINT_BYTES
WAL_CHECK_EVERY_S = 1.0
WAL_STALL_POLL_S = 0.25
# How often an idle worker looks whether another marked the crawl finished.
FINISH_POLL_S = 0.05
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
        self.wal_stalls = 0  # commits held back for the WAL bound (tests, diagnostics)
        self._wal_checked_at = 0.0
        self._stopping = False
        self._previous_reader: _PreviousReader | None = None
        self._previous_id: tuple[int | None] | None = None  # read once: (id,)
        self._merging: asyncio.Future[int] | None = None  # a merge of open links sent ahead
        self._ran_dry = False  # the last lease found fewer rows than asked (writer thread)

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        merging, self._merging = self._merging, None
        try:
            if merging is not None:  # ahead of this job on the writer: its failure is this call's
                await merging
            return await loop.run_in_executor(
                self._executor, functools.partial(fn, *args, **kwargs)
            )
        except sqlite3.Error as exc:  # a read outside ``atomic`` failed
            raise db.translate(exc) from exc

    async def enqueue(self, seeds: Sequence[Discovered], now: float) -> int:
        return await self._run(self.sync.enqueue, seeds, now)

    async def lease(self, owner: str, limit: int, ttl_s: float, now: float) -> list[LeasedUrl]:
        return await self._run(self.sync.lease, owner, limit, ttl_s, now)

    async def lease_more(self, owner: str, ask: LeaseAsk, now: float) -> LeaseGrant:
        """One job on the writer thread (lease, cookies), a re-crawl's pages from the reader."""
        return await self._with_previous(await self._run(self._lease_more, owner, ask, now))

    async def renew(self, owner: str, ttl_s: float, now: float) -> int:
        renewed = await self._run(self.sync.renew, owner, ttl_s, now)
        await self._run(self.sync.checkpoint)
        return renewed

    async def complete(self, owner: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        await self._keep_wal_bounded()
        accepted = await self._run(self.sync.complete, owner, outcomes, now, merge_links=False)
        self._send_merge()
        return accepted

    async def complete_and_lease(
        self, owner: str, outcomes: Sequence[Outcome], now: float, ask: LeaseAsk
    ) -> tuple[list[bool], LeaseGrant]:
        """The group commit and the next lease as one job: no other job runs between them."""
        await self._keep_wal_bounded()
        accepted, grant = await self._run(self._complete_then_lease, owner, outcomes, now, ask)
        self._send_merge()
        return accepted, await self._with_previous(grant)

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

    async def wait_for_finish(self, timeout_s: float) -> bool:
        """SQLite tells no one of a commit: look every FINISH_POLL_S (a point read)."""
        deadline = time.monotonic() + timeout_s
        while not await self._run(crawls.is_finished, self._conn, self.crawl_id):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(FINISH_POLL_S, left))
        return True

    async def is_seeded(self) -> bool:
        return await self._run(crawls.is_seeded, self._conn, self.crawl_id)

    async def mark_seeded(self, now: float) -> None:
        await self._run(crawls.mark_seeded, self._conn, self.crawl_id, now)

    async def add_elapsed(self, seconds: float) -> None:
        await self._run(crawls.add_elapsed, self._conn, self.crawl_id, seconds)

    async def get_robots(self, host: str) -> tuple[int | None, str] | None:
        return await self._run(hostdata.get_robots, self._conn, self.crawl_id, host)

    async def put_robots(self, host: str, status: int | None, body: str, now: float) -> None:
        await self._run(hostdata.put_robots, self._conn, self.crawl_id, host, status, body, now)

    async def put_cookies(self, changed: Sequence[Cookie], now: float) -> None:
        await self._run(cookies.put_cookies, self._conn, self.crawl_id, changed, now)

    async def get_cookies(self, since: float | None = None) -> list[Cookie]:
        return await self._run(cookies.get_cookies, self._conn, self.crawl_id, since)

    async def previous_pages(
        self, urls: Sequence[str], *, with_links: bool = True
    ) -> dict[str, PreviousPage]:
        """What the crawl this one re-crawls stored for these pages (off the writer thread)."""
        if self._previous_id is None:
            self._previous_id = (await self._run(self.sync.previous_crawl),)
        previous = self._previous_id[0]
        if previous is None or not urls:
            return {}
        if self._previous_reader is None:
            path = await self._run(db.file_of, self._conn)
            self._previous_reader = _PreviousReader(path)
        return await self._previous_reader.read(previous, urls, with_links)

    def _lease_more(self, owner: str, ask: LeaseAsk, now: float) -> LeaseGrant:
        """On the writer thread: the lease, then the cookies stored meanwhile."""
        rows = self.sync.lease(owner, ask.limit, ask.ttl_s, now)
        self._ran_dry = len(rows) < ask.limit
        found = None
        if rows and ask.cookies_since is not None:
            found = cookies.get_cookies(self._conn, self.crawl_id, ask.cookies_since)
        if self._previous_id is None and any(row.kind == UrlKind.PAGE for row in rows):
            self._previous_id = (self.sync.previous_crawl(),)  # once, on this thread
        return LeaseGrant(rows=rows, cookies=found)

    def _send_merge(self) -> None:
        """The merge of open links, if due, as the writer's next job, not part of a commit's:
        the rows already granted are fetched meanwhile."""
        self._merging = asyncio.get_running_loop().run_in_executor(
            self._executor, self._merge_links_due
        )

    def _merge_links_due(self) -> int:
        """On the writer thread: held back while the last lease found the frontier dry."""
        return self.sync.merge_links_due(dry=self._ran_dry)

    def _complete_then_lease(
        self, owner: str, outcomes: Sequence[Outcome], now: float, ask: LeaseAsk
    ) -> tuple[list[bool], LeaseGrant]:
        accepted = self.sync.complete(owner, outcomes, now, merge_links=False)
        return accepted, self._lease_more(owner, ask, now)

    async def _with_previous(self, grant: LeaseGrant) -> LeaseGrant:
        """A re-crawl's previous pages for the page rows leased (none read for other crawls)."""
        if self._previous_id is None or self._previous_id[0] is None:
            return grant
        pages = [row.url for row in grant.rows if row.kind == UrlKind.PAGE]
        if not pages:
            return grant
        previous = await self.previous_pages(pages, with_links=False)  # the store copies them
        return dataclasses.replace(grant, previous=previous)

    async def head_unreliable_hosts(self) -> list[str]:
        return await self._run(cookies.head_unreliable_hosts, self._conn, self.crawl_id)

    def host_gate(self, owner: str, limits: Limits, ttl_s: float, wake: Callable[[], None]) -> Gate:
        """One process per crawl at a time here: the gate lives in memory."""
        return HostGate(limits)

    def stopping(self) -> None:
        """Commit what the caller still hands over, past the WAL bound if need be."""
        self._stopping = True

    async def _keep_wal_bounded(self) -> None:
        """Hold commits while a long reader keeps the WAL from being reset."""
        now = time.monotonic()
        if now - self._wal_checked_at < WAL_CHECK_EVERY_S:
            return
        self._wal_checked_at = now
        warned = False
        while not self._stopping and not await self._run(self.sync.bound_wal, WAL_LIMIT_BYTES):
            if not warned:
                log.warning(
                    "wal_limit_reached",
                    limit_mb=WAL_LIMIT_BYTES >> 20,
                    hint="a reader holds an old snapshot; commits wait for it",
                )
                warned = True
            self.wal_stalls += 1
            await asyncio.sleep(WAL_STALL_POLL_S)

    def close(self) -> None:
        """Stop the writer thread and close the connection."""
        if self._previous_reader is not None:
            self._previous_reader.close()
        self._executor.shutdown(wait=True)
        if self._merging is not None and self._merging.done() and not self._merging.cancelled():
            # Its rows stay in link_fresh, where every reader finds them.
            self._merging.exception()
        self._conn.close()


class _PreviousReader:
    """A read-only connection on its own thread, for a re-crawl's reads of its previous crawl."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="crawler-previous"
        )
        self._conn: sqlite3.Connection | None = None  # made on the reader's thread

    async def read(
        self, previous: int, urls: Sequence[str], with_links: bool
    ) -> dict[str, PreviousPage]:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._executor, self._read, previous, urls, with_links
            )
        except sqlite3.Error as exc:
            raise db.translate(exc) from exc

    def _read(
        self, previous: int, urls: Sequence[str], with_links: bool
    ) -> dict[str, PreviousPage]:
        if self._conn is None:
            self._conn = db.open_reader(self._path)
        return recrawl.previous_pages(self._conn, previous, urls, with_links=with_links)

    def close(self) -> None:
        def close_conn() -> None:
            if self._conn is not None:
                self._conn.close()

        self._executor.submit(close_conn).result()
        self._executor.shutdown(wait=True)
