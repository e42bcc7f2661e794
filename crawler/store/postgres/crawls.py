"""Crawl rows on PostgreSQL: creating a crawl, finding the one to resume or report on.

The same questions as ``crawler.store.crawls`` answers for SQLite, returning
the same ``CrawlRecord``; each function runs on a connection the caller holds
(inside its transaction, when it has one).
"""

from __future__ import annotations

import json
from typing import Any

from crawler.errors import UsageError
from crawler.models import CrawlRecord

_COLUMNS = "id, seeds::text, config::text, state, started_at, finished_at, elapsed_s"


async def create(
    conn: Any, seeds: list[str], config: dict[str, Any], now: float, crawl_id: int | None = None
) -> int:
    """Start a new crawl; return its id (``crawl_id`` when given: the service's own)."""
    new_id = await conn.fetchval(
        "INSERT INTO crawl (id, seeds, config, started_at) "
        "VALUES (COALESCE($4, nextval(pg_get_serial_sequence('crawl', 'id'))), "
        "$1::jsonb, $2::jsonb, $3) RETURNING id",
        json.dumps(seeds),
        json.dumps(config, sort_keys=True),
        now,
        crawl_id,
    )
    return int(new_id)


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
