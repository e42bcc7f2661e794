"""The diff of two of the service's crawls, whichever backend keeps them.

One function, ``diff_of``, so that the diff's source is one import line:
today the placeholder ``crawler.report.diff.diff_reports`` over the two
crawls' reports (read through the ``ServiceStore``, as the report endpoint
reads them); h17a's ``load_diff`` replaces it at merge.
"""

from __future__ import annotations

from crawler.report.diff import CrawlDiff, diff_reports
from crawler.store.service import ServiceStore

DIFF_FORMAT = "json"  # what the report endpoint's JSON reads: broken links with sources


async def diff_of(store: ServiceStore, from_crawl: int, to_crawl: int) -> CrawlDiff | None:
    """What changed from ``from_crawl`` to ``to_crawl``; None while either has no data."""
    before = await store.load_report(from_crawl, DIFF_FORMAT)
    after = await store.load_report(to_crawl, DIFF_FORMAT)
    if before is None or after is None:
        return None
    return diff_reports(from_crawl, before, to_crawl, after)
