"""Open links on PostgreSQL: appended to ``link_fresh``, moved into ``link_open`` in batches.

``link_open`` is keyed by target, because reports ask "who links to this
broken URL?". Inserting each page's links into it as the page completed
dirtied a random leaf of that key per link, in every commit and again after
every checkpoint (a full page image): the largest item of a crawl's server
time. So a completion appends them to ``link_fresh``, a heap without index
(``record``), and once it holds a batch (as many rows as there are URLs,
within ``MIN_BATCH_ROWS`` and ``MAX_BATCH_ROWS``) one worker moves it into
``link_open`` sorted by target (``merge``): each leaf is then written about
once per batch (migration 0017).

A merge is one transaction (``DELETE … RETURNING`` feeding a sorted
``INSERT``): a reader's snapshot sees each link in exactly one of the two
tables, and a merge killed midway leaves everything in ``link_fresh``. Only
one runs at a time (an advisory lock); it runs in the background on a pool
connection of its own, so the completions that trigger it do not wait, and
rows appended meanwhile by any worker are left for the next batch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information
import structlog

from crawler.store.postgres import arrays

log = structlog.get_logger(__name__)

MIN_BATCH_ROWS = 200_000
# ... and at most this many: a report reads link_fresh whole (no index), a few
# times, so what is left unmerged at the end of a crawl must stay small.
MAX_BATCH_ROWS = 500_000
# Look at the table's size once this process appended this many rows since it
# last looked (the statistics the look reads cost two catalog lookups).
CHECK_EVERY_ROWS = 20_000
_MERGE_LOCK = 0x43524C4D  # "CRLM": one merge at a time on the database
# The batch is sorted in memory rather than in temporary files.
_MERGE_WORK_MEM = "256MB"

_APPEND = """
INSERT INTO link_fresh (target_id, source_id, fragment, element, line, col)
SELECT * FROM unnest($1::text::bigint[], $2::text::bigint[], $3::text::text[], $4::text::text[],
                     $5::text::integer[], $6::text::integer[])
"""
_MERGE = """
WITH moved AS (
    DELETE FROM link_fresh RETURNING target_id, source_id, fragment, element, line, col
)
INSERT INTO link_open (target_id, source_id, fragment, element, line, col)
SELECT target_id, source_id, fragment, element, line, col FROM moved
ORDER BY target_id, source_id, fragment
ON CONFLICT DO NOTHING
"""
# Live rows as the statistics count them (inserts less deletes, a second late).
_SIZES = """
SELECT (SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'link_fresh'::regclass),
       (SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'url'::regclass)
"""

# (target, source, fragment) -> (element, line, column)
Edges = Mapping[tuple[int, int, str], tuple[str, int | None, int | None]]


async def record(conn: Any, edges: Edges) -> None:
    """Append open links in the caller's transaction, sorted by key."""
    keys = sorted(edges)
    await conn.execute(
        _APPEND,
        arrays.numbers([k[0] for k in keys]),
        arrays.numbers([k[1] for k in keys]),
        arrays.texts([k[2] for k in keys]),
        arrays.texts([edges[k][0] for k in keys]),
        arrays.numbers([edges[k][1] for k in keys]),
        arrays.numbers([edges[k][2] for k in keys]),
    )


async def merge(conn: Any, *, wait: bool = False) -> int | None:
    """Move every row of ``link_fresh`` into ``link_open``; rows moved.

    None when another merge holds the lock and ``wait`` is false; with
    ``wait`` this one runs after it (and finds what was appended since).
    """
    async with conn.transaction():
        if wait:
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MERGE_LOCK)
        elif not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _MERGE_LOCK):
            return None
        await conn.execute(f"SET LOCAL work_mem = '{_MERGE_WORK_MEM}'")
        status = await conn.execute(_MERGE)
    return int(status.rsplit(" ", 1)[1])


async def due(conn: Any) -> bool:
    """Whether ``link_fresh`` holds a batch: as many rows as ``url``, within the bounds."""
    fresh, urls = await conn.fetchrow(_SIZES)
    return int(fresh or 0) >= min(MAX_BATCH_ROWS, max(MIN_BATCH_ROWS, int(urls or 0)))


class LinkMerger:
    """Counts the rows this store appended; merges in the background once a batch is due."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._appended = 0
        self._task: asyncio.Task[None] | None = None
        self.merges = 0  # merges run by this store (tests, diagnostics)

    def appended(self, rows: int) -> None:
        """Count rows appended (committed or not: the count only paces the checks)."""
        self._appended += rows

    def poll(self) -> None:
        """Start a check (and maybe a merge) in the background if due; on the store's loop."""
        if self._appended < CHECK_EVERY_ROWS or self._pool is None:
            return
        if self._task is not None and not self._task.done():
            return
        self._appended = 0
        self._task = asyncio.get_running_loop().create_task(self._check())

    async def _check(self) -> None:
        try:
            async with self._pool.acquire() as conn:
                if await due(conn):
                    started = time.monotonic()
                    moved = await merge(conn)
                    if moved is not None:
                        self.merges += 1
                        log.info(
                            "links_merged",
                            rows=moved,
                            seconds=round(time.monotonic() - started, 3),
                        )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("link_merge_failed", error=str(exc))

    async def close(self) -> None:
        """Stop a merge under way: rolled back, its rows stay in ``link_fresh``."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
