"""Running a crawl in-process for tests, and reading its report back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from crawler import report, runner
from crawler.config import CrawlSettings
from crawler.store import db

CRAWL_BOUND_S = 60.0


async def crawl(db_path: Path, seeds: list[str], **settings: Any) -> report.ReportData:
    """Crawl to the end (bounded in time) and return the report data."""
    settings.setdefault("max_retries", 0)
    job = runner.start(db_path, seeds, CrawlSettings(**settings))
    try:
        finished = await asyncio.wait_for(job.run(), CRAWL_BOUND_S)
    finally:
        job.close()
    assert finished, "the crawl did not finish"
    return read_report(db_path)


def read_report(db_path: Path, crawl_id: int | None = None) -> report.ReportData:
    conn = db.open_reader(db_path)
    try:
        return report.load(conn, crawl_id)
    finally:
        conn.close()


def comparable(data: report.ReportData) -> dict[str, Any]:
    """The report without its timings, for comparing two runs."""
    return {
        "summary": data.summary,
        "broken": [(b.url, b.status, b.error, tuple(b.sources)) for b in data.broken],
    }
