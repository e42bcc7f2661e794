"""What changed between two crawls (PLACEHOLDER until h17a's real diff is merged).

``CrawlDiff`` has the API the real one has: the two crawl ids, the broken
links that are new, fixed and still broken, the pages that appeared and
disappeared, and ``counts()``. This placeholder computes the broken-link
lists by broken URL from two ``ReportData`` (``diff_reports``); the page
lists are filled only when both reports carry their pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crawler.report.model import BrokenLink, ReportData

COUNT_KEYS = ("new_broken", "fixed", "still_broken", "pages_added", "pages_removed")


@dataclass(frozen=True)
class CrawlDiff:
    """The changes from crawl ``from_crawl`` to crawl ``to_crawl``."""

    from_crawl: int
    to_crawl: int
    new_broken: list[BrokenLink] = field(default_factory=list)
    fixed: list[BrokenLink] = field(default_factory=list)
    still_broken: list[BrokenLink] = field(default_factory=list)
    pages_added: list[str] = field(default_factory=list)
    pages_removed: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """How many of each change."""
        return {key: len(getattr(self, key)) for key in COUNT_KEYS}


def diff_reports(
    from_crawl: int, before: ReportData, to_crawl: int, after: ReportData
) -> CrawlDiff:
    """The diff of two reports, by broken URL."""
    old = {link.url: link for link in before.broken}
    new = {link.url: link for link in after.broken}
    old_pages = set(before.pages or ())
    new_pages = set(after.pages or ())
    return CrawlDiff(
        from_crawl=from_crawl,
        to_crawl=to_crawl,
        new_broken=[new[url] for url in sorted(new.keys() - old.keys())],
        fixed=[old[url] for url in sorted(old.keys() - new.keys())],
        still_broken=[new[url] for url in sorted(new.keys() & old.keys())],
        pages_added=sorted(new_pages - old_pages),
        pages_removed=sorted(old_pages - new_pages),
    )
