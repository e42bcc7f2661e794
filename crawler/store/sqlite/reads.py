"""What the service reads from a crawl's database, on read-only connections.

Blocking functions: callers run them in a thread. Each opens its own reader
(``store.db.open_reader``), so it never waits for the crawl's writer and works
while the crawl runs. The per-host totals read the ``url_result`` view, part of
the documented SQL interface.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from crawler.models import Counts
from crawler.report.diff import CrawlDiff
from crawler.report.model import ReportData
from crawler.store import crawl_stats as stats
from crawler.store.crawl_stats import CrawlStats
from crawler.store.service import Snapshot, WorkerRow
from crawler.store.sqlite import crawls, db, results
from crawler.store.sqlite import diff as sqlite_diff
from crawler.store.sqlite import report as sqlite_report
from crawler.store.sqlite.frontier import Frontier

_HOST_TOTALS = """
SELECT host,
       count(*),
       sum(CASE WHEN status >= 500
                  OR (error_kind IS NOT NULL AND error_kind <> 'http_status')
                THEN 1 ELSE 0 END)
FROM url_result
WHERE crawl_id = ? AND host IS NOT NULL AND class IN ('ok', 'redirected', 'broken')
GROUP BY host
"""


def snapshot(path: Path, crawl_id: int | None = None) -> Snapshot:
    """Counters of crawl ``crawl_id`` in ``path`` (None: its one crawl), in one transaction.

    ``pages`` and ``broken`` are the report's (``results.summary``): pages
    crawled with an OK answer; broken URLs with redirects followed and links
    to a missing #fragment; so the API and every report agree.
    """
    conn = db.open_reader(path)
    try:
        conn.execute("BEGIN")
        record = crawls.get(conn, crawl_id)
        counts = Frontier(conn, record.id).counts()
        summary = results.summary(conn, record.id)
        counts = dataclasses.replace(counts, pages=summary.pages, broken=summary.broken)
        return Snapshot(counts, record.elapsed_s, record.state == "finished")
    finally:
        conn.close()


def counts(path: Path, crawl_id: int | None = None) -> Counts:
    """Frontier counters only (the live sampler's question)."""
    return snapshot(path, crawl_id).counts


def host_totals(path: Path, crawl_id: int | None = None) -> dict[str, tuple[int, int]]:
    """host -> (URLs requested, of which no response or 5xx), for the crawl in ``path``."""
    conn = db.open_reader(path)
    try:
        record = crawls.get(conn, crawl_id)
        rows = conn.execute(_HOST_TOTALS, (record.id,)).fetchall()
    finally:
        conn.close()
    return {host: (int(total), int(errors or 0)) for host, total, errors in rows}


def crawl_stats(path: Path, crawl_id: int | None = None) -> CrawlStats:
    """Per-host statistics, exclusion reasons and refused seeds of crawl ``crawl_id``."""
    conn = db.open_reader(path)
    try:
        conn.execute("BEGIN")
        crawl_id = crawls.get(conn, crawl_id).id

        def run(sql: str) -> list[Any]:
            return conn.execute(sql.format(p="?1"), (crawl_id,)).fetchall()

        return CrawlStats(
            stats.host_stats(run(stats.HOST_STATS_SQL)),
            stats.exclusions(run(stats.EXCLUSIONS_SQL)),
            [(url, error) for url, error in run(stats.REFUSED_SQL)],
        )
    finally:
        conn.close()


def workers(path: Path, crawl_id: int | None = None) -> list[WorkerRow]:
    """The processes working on the crawl in ``path`` (all its crawls'), oldest first."""
    conn = db.open_reader(path)
    try:
        rows = conn.execute(
            "SELECT token, pid, hostname, started_at, heartbeat_at, urls_done, pages_done "
            "FROM worker WHERE ? IS NULL OR crawl_id = ? ORDER BY started_at, token",
            (crawl_id, crawl_id),
        ).fetchall()
    finally:
        conn.close()
    return [WorkerRow(*row) for row in rows]


def load_report(path: Path, fmt: str, crawl_id: int | None = None) -> ReportData:
    """The crawl's report data, as much as format ``fmt`` shows."""
    conn = db.open_reader(path)
    try:
        return sqlite_report.load(conn, crawl_id, fmt)
    finally:
        conn.close()


def load_diff(path: Path, from_crawl: int, to_crawl: int) -> CrawlDiff:
    """Two crawls of one file compared, in one snapshot (``diff.load``)."""
    conn = db.open_reader(path)
    try:
        return sqlite_diff.load(conn, from_crawl, to_crawl)
    finally:
        conn.close()
