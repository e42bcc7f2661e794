"""Two SQLite crawls compared (``crawler diff``), read in one snapshot.

The broken links and pages of each crawl are the report's own
(``results.broken_links``, ``results.pages``); ``crawler.report.diff``
compares them.
"""

from __future__ import annotations

import json
import sqlite3

from crawler.report.diff import CrawlDiff, CrawlEntry, compare, pick_pair
from crawler.store.sqlite import results


def entries(conn: sqlite3.Connection) -> list[CrawlEntry]:
    """Every crawl's id, seeds and whether it finished, oldest first."""
    rows = conn.execute("SELECT id, seeds, state FROM crawl ORDER BY id")
    return [CrawlEntry(row[0], tuple(json.loads(row[1])), row[2] == "finished") for row in rows]


def load(
    conn: sqlite3.Connection, from_crawl: int | None = None, to_crawl: int | None = None
) -> CrawlDiff:
    """The diff of two crawls (default: the last two finished crawls of the same seeds)."""
    conn.execute("BEGIN")  # one snapshot for all the queries below
    try:
        first, last = pick_pair(entries(conn), from_crawl, to_crawl)
        return compare(
            first or 0,
            last,
            results.broken_links(conn, first) if first else [],
            results.broken_links(conn, last),
            results.pages(conn, first) if first else [],
            results.pages(conn, last),
        )
    finally:
        conn.execute("COMMIT")
