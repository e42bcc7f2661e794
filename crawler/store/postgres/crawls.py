"""Crawl rows on PostgreSQL: creating a crawl (with its seeds), finding one to resume or report on.

The same questions as ``crawler.store.crawls`` answers for SQLite, returning
the same ``CrawlRecord``; each function runs on a connection the caller holds
(inside its transaction, when it has one).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from crawler.errors import UsageError
from crawler.models import CrawlRecord, Discovered
from crawler.store.postgres import complete as completion
from crawler.store.postgres.discover import Recorder

_COLUMNS = "id, seeds::text, config::text, state, started_at, finished_at, elapsed_s"


async def create(
    conn: Any,
    seeds: list[str],
    config: dict[str, Any],
    now: float,
    *,
    enqueue: Sequence[Discovered] = (),
    seeded: bool = True,
    max_urls: int | None = None,
    max_cache_age_s: float | None = None,
    crawl_id: int | None = None,
    previous_crawl_id: int | None = None,
) -> int:
    """Record a new crawl and enqueue its classified seeds; return its id.

    ``crawl_id``, when given, is an id the service reserved from the crawl
    table's own sequence (its index row is made first, the crawl later).

    Run it inside one transaction: a crawl is never visible without its
    seeds. ``seeded`` False leaves the crawl waiting for its sitemaps
    (``mark_seeded``); ``previous_crawl_id`` makes it a re-crawl of that crawl.
    """
    crawl_id = int(
        await conn.fetchval(
            "INSERT INTO crawl (id, seeds, config, started_at, seeded_at, previous_crawl_id) "
            "VALUES (COALESCE($5, nextval(pg_get_serial_sequence('crawl', 'id'))), "
            "$1::jsonb, $2::jsonb, $3, $4, $6) RETURNING id",
            json.dumps(seeds),
            json.dumps(config, sort_keys=True),
            now,
            now if seeded else None,
            crawl_id,
            previous_crawl_id,
        )
    )
    if enqueue:
        recorder = Recorder(crawl_id, max_urls=max_urls, max_cache_age_s=max_cache_age_s)
        await completion.enqueue(conn, recorder, enqueue, now)
    return crawl_id


async def is_seeded(conn: Any, crawl_id: int) -> bool:
    """Does the frontier hold everything the crawl starts from (seeds, sitemap pages)?"""
    return bool(
        await conn.fetchval("SELECT seeded_at IS NOT NULL FROM crawl WHERE id = $1", crawl_id)
    )


async def mark_seeded(conn: Any, crawl_id: int, now: float) -> None:
    """Record that the seeds and the sitemaps' pages are in the frontier."""
    await conn.execute(
        "UPDATE crawl SET seeded_at = COALESCE(seeded_at, $1) WHERE id = $2", now, crawl_id
    )


async def get(conn: Any, crawl_id: int | None = None) -> CrawlRecord:
    """The crawl with this id, or the latest one; UsageError when there is none."""
    if crawl_id is None:
        row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM crawl ORDER BY id DESC LIMIT 1")
        if row is None:
            raise UsageError("the database holds no crawl yet; start one with `crawler crawl URL`")
    else:
        row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM crawl WHERE id = $1", crawl_id)
        if row is None:
            raise UsageError(f"no crawl with id {crawl_id} in this database")
    return CrawlRecord(
        id=int(row[0]),
        seeds=json.loads(row[1]),
        config=json.loads(row[2]),
        state=str(row[3]),
        started_at=float(row[4]),
        finished_at=None if row[5] is None else float(row[5]),
        elapsed_s=float(row[6]),
    )


async def latest_unfinished(conn: Any) -> CrawlRecord | None:
    """The newest crawl that has not finished, if any."""
    crawl_id = await conn.fetchval("SELECT max(id) FROM crawl WHERE state = 'running'")
    return None if crawl_id is None else await get(conn, int(crawl_id))


async def add_elapsed(conn: Any, crawl_id: int, seconds: float) -> None:
    """Add this run's active time, so pages/s stays honest across resumes."""
    await conn.execute(
        "UPDATE crawl SET elapsed_s = elapsed_s + $1 WHERE id = $2", seconds, crawl_id
    )
