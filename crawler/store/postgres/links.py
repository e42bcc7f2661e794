"""Open links on PostgreSQL: appended to ``link_fresh``, moved into ``link_open`` in runs.

``link_open`` is searched by target, because reports ask "who links to this
broken URL?". Inserting each page's links into a target-keyed index as the
page completed dirtied a random leaf of that key per link, in every commit and
again after every checkpoint (a full page image); merging batches into one
such index still inserted each row into a tree that grows with the crawl.
So a completion appends its links to ``link_fresh``, a heap without index
(``record``), and once it holds a batch (as many rows as there are URLs,
within ``MIN_BATCH_ROWS`` and ``MAX_BATCH_ROWS``) one worker moves it into a
run of its own (``merge``): a new partition of ``link_open`` (migration 0023),
filled in key order, then indexed by target, by source and by target where a
fragment is named, each index built once over the whole run.

A merge is one transaction (``DELETE … RETURNING`` feeding the run, its
indexes, the partition attached): a reader's snapshot sees each link in
exactly one of the two tables, and a merge killed midway leaves everything in
``link_fresh``. Only one runs at a time (an advisory lock); it runs in the
background on a pool connection of its own, so the completions that trigger
it do not wait, and rows appended meanwhile by any worker are left for the
next batch. The run is attached under a lock that waits for the readers of
``link_open`` at that moment and holds new ones for the commit (``merge``);
completions never wait for it. Runs a deleted crawl emptied are dropped
(``drop_empty_runs``).
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
# How long a merge waits for the readers of link_open before it gives up (the
# links stay in link_fresh for the next one): readers queue behind it meanwhile.
_ATTACH_LOCK_TIMEOUT = "10s"
# The batch is sorted in memory rather than in temporary files.
_MERGE_WORK_MEM = "256MB"

_APPEND = """
INSERT INTO link_fresh (target_id, source_id, fragment, element, line, col)
SELECT * FROM unnest($1::text::bigint[], $2::text::bigint[], $3::text::text[], $4::text::text[],
                     $5::text::integer[], $6::text::integer[])
"""
# A run: link_fresh's rows, one of each key (the first of a page completed again
# is as good as its second), in key order; then its indexes and the partition.
_MOVE = """
WITH moved AS (
    DELETE FROM link_fresh RETURNING target_id, source_id, fragment, element, line, col
)
INSERT INTO {run} (target_id, source_id, fragment, element, line, col, run)
SELECT DISTINCT ON (target_id, source_id, fragment)
       target_id, source_id, fragment, element, line, col, {number}
FROM moved
ORDER BY target_id, source_id, fragment
"""
# A run is never inserted into once built (only deleted from): its leaves are
# packed full, the room B-trees leave for later inserts is only more to read.
_RUN_INDEXES = (
    "CREATE INDEX {run}_target ON {run} (target_id) WITH (fillfactor = 100)",
    "CREATE INDEX {run}_source ON {run} (source_id) WITH (fillfactor = 100)",
    "CREATE INDEX {run}_fragment ON {run} (target_id) WITH (fillfactor = 100) WHERE fragment <> ''",
)
# Every run, oldest first; run 0 (the links migration 0023 found) included.
_RUNS = """
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'link_open'::regclass ORDER BY c.oid
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
    """Move every row of ``link_fresh`` into a new run of ``link_open``; rows moved.

    None when another merge holds the lock and ``wait`` is false; with
    ``wait`` this one runs after it (and finds what was appended since).
    """
    async with conn.transaction():
        if wait:
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MERGE_LOCK)
        elif not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _MERGE_LOCK):
            return None
        if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM link_fresh)"):
            return 0  # rows only come in while the lock is held: the move finds some
        await conn.execute(f"SET LOCAL work_mem = '{_MERGE_WORK_MEM}'")
        await conn.execute(f"SET LOCAL maintenance_work_mem = '{_MERGE_WORK_MEM}'")
        number = int(await conn.fetchval("SELECT nextval('link_open_run')"))
        run = f"link_open_run_{number}"
        # The check lets the attachment trust the rows without reading them again.
        await conn.execute(
            f"CREATE TABLE {run} (LIKE link_open, CONSTRAINT {run}_run CHECK (run = {number}))"
        )
        status = await conn.execute(_MOVE.format(run=run, number=number))
        for statement in _RUN_INDEXES:
            await conn.execute(statement.format(run=run))
        await conn.execute(f"ANALYZE {run}")
        # A statement plans with the partitions attached when it is planned but
        # reads the rows committed when it starts: one planned just before this
        # commit and started just after would read link_fresh emptied and no run
        # holding its rows. Under this lock no reader is between the two.
        await conn.execute(f"SET LOCAL lock_timeout = '{_ATTACH_LOCK_TIMEOUT}'")
        await conn.execute("LOCK TABLE link_open IN ACCESS EXCLUSIVE MODE")
        await conn.execute(f"ALTER TABLE link_open ATTACH PARTITION {run} FOR VALUES IN ({number})")
    return int(status.rsplit(" ", 1)[1])


async def drop_empty_runs(conn: Any) -> list[str]:
    """Drop the runs of ``link_open`` that hold no row (after a crawl is deleted); their names.

    Dropping a partition locks ``link_open`` whole for a moment: a run whose
    lock is not had within ``lock_timeout`` is left for the next time.
    """
    dropped = []
    for (run,) in await conn.fetch(_RUNS):
        try:
            async with conn.transaction():
                await conn.execute("SET LOCAL lock_timeout = '2s'")
                if await conn.fetchval(f'SELECT NOT EXISTS (SELECT 1 FROM "{run}")'):
                    await conn.execute(f'DROP TABLE "{run}"')
                    dropped.append(str(run))
        except asyncpg.LockNotAvailableError:
            log.info("empty_run_kept", run=str(run))
    return dropped


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
