"""Running a crawl in-process for tests, and reading its report back, on either backend.

``db`` is a SQLite path or a PostgreSQL URL (``pgkit.any_db`` gives both).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from crawler import report
from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.store import open as store_open

CRAWL_BOUND_S = 60.0


async def crawl(
    db: str | Path, seeds: list[str], *, parse_helpers: int = 0, **settings: Any
) -> report.ReportData:
    """Crawl to the end (bounded in time) and return the report data."""
    settings.setdefault("max_retries", 0)
    job = runner.start(db, seeds, CrawlSettings(**settings))
    try:
        finished = await asyncio.wait_for(job.run(parse_helpers=parse_helpers), CRAWL_BOUND_S)
    finally:
        job.close()
    assert finished, "the crawl did not finish"
    return read_report(db)


def read_report(db: str | Path, crawl_id: int | None = None) -> report.ReportData:
    """The report of a crawl (the latest when no id is given)."""
    return store_open.load_report(str(db), crawl_id)


def comparable(data: report.ReportData) -> dict[str, Any]:
    """The report without its timings, for comparing two runs."""
    return {
        "summary": data.summary,
        "broken": [(b.url, b.status, b.error, tuple(b.sources)) for b in data.broken],
    }
