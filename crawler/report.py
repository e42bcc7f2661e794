"""Reports: load a crawl's results once, then render them in any format.

``load`` reads everything a report shows in one read transaction (one
snapshot, even while the crawl is writing); ``render`` hands the data to a
format from ``crawler.formats``. Formats never query the database, so they
cannot disagree about what is broken.
"""

from __future__ import annotations

import sqlite3

from crawler import formats
from crawler.formats import ReportData
from crawler.store import crawls, results

__all__ = ["FORMATS", "ReportData", "load", "render"]

FORMATS: tuple[str, ...] = tuple(formats.REGISTRY)


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
        )
    finally:
        conn.execute("COMMIT")


def render(data: ReportData, fmt: str) -> str:
    """The report in one of ``FORMATS``."""
    return formats.get(fmt).render(data)
