"""Two PostgreSQL crawls compared (``crawler diff``), read in one snapshot.

The same reads as ``crawler.store.sqlite.diff``: each crawl's broken links and
pages as its report has them, compared by ``crawler.report.diff``.
"""

from __future__ import annotations

import json
from typing import Any

from crawler.report.diff import CrawlDiff, CrawlEntry, compare, pick_pair
from crawler.store.postgres import report


async def entries(conn: Any) -> list[CrawlEntry]:
    """Every crawl's id, seeds and whether it finished, oldest first."""
    rows = await conn.fetch("SELECT id, seeds::text, state FROM crawl ORDER BY id")
    return [
        CrawlEntry(int(row[0]), tuple(json.loads(row[1])), row[2] == "finished") for row in rows
    ]


async def load(conn: Any, from_crawl: int | None = None, to_crawl: int | None = None) -> CrawlDiff:
    """The diff of two crawls (default: the last two finished crawls of the same seeds)."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        first, last = pick_pair(await entries(conn), from_crawl, to_crawl)
        return compare(
            first or 0,
            last,
            await report.broken_links(conn, first) if first else [],
            await report.broken_links(conn, last),
            await report.pages(conn, first) if first else [],
            await report.pages(conn, last),
        )
