"""A SQLite crawl's ``ReportData``, read in one snapshot.

``load`` reads everything a report shows in one read transaction (one
snapshot, even while the crawl is writing).
"""

from __future__ import annotations

import sqlite3

from crawler import report as formats
from crawler.report.model import ReportData
from crawler.store.sqlite import crawls, results


def load(
    conn: sqlite3.Connection, crawl_id: int | None = None, fmt: str | None = None
) -> ReportData:
    """Read the report of a crawl (the latest when no id is given).

    With ``fmt``, read only what that format needs: the crawled pages and
    every result are read only for the formats that show them.
    """
    needs = formats.get(fmt).needs if fmt is not None else formats.ALL_PARTS
    conn.execute("BEGIN")  # one snapshot for all the queries below
    try:
        crawl = crawls.get(conn, crawl_id)
        return ReportData(
            crawl=crawl,
            summary=results.summary(conn, crawl.id),
            broken=results.broken_links(conn, crawl.id),
            edges=results.broken_edges(conn, crawl.id),
            pages=results.pages(conn, crawl.id) if "pages" in needs else None,
            results=list(results.iter_results(conn, crawl.id)) if "results" in needs else None,
            head_overruled=results.head_overruled(conn, crawl.id),
            render_issues=results.render_issues(conn, crawl.id),
        )
    finally:
        conn.execute("COMMIT")
