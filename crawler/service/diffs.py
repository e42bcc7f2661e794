"""The diff of two runs of a crawl definition, whichever backend keeps them.

One function, ``diff_of``, so that the API, the dashboard and the webhooks
take the diff from one place: ``ServiceStore.load_diff``, which reads both
runs in one snapshot of the database that holds them (PostgreSQL, or the
definition's SQLite file) and compares them with ``crawler.report.diff``, as
``crawler diff`` does.
"""

from __future__ import annotations

from crawler.report.diff import CrawlDiff
from crawler.store.service import ServiceStore


async def diff_of(store: ServiceStore, from_crawl: int, to_crawl: int) -> CrawlDiff | None:
    """What changed from ``from_crawl`` to ``to_crawl``; None while either has no data."""
    return await store.load_diff(from_crawl, to_crawl)
