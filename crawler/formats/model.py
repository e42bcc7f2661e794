"""What every report format is rendered from, and what a format is.

``ReportData`` is read in one snapshot by ``crawler.report.load``; a format is
a pure function from it to text. Formats that need more than the summary and
the broken links (the crawled pages, every result) say so in ``Format.needs``,
so a report in another format does not read them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from crawler.store.crawls import CrawlRecord
from crawler.store.results import BrokenEdge, BrokenLink, ResultRow, Summary

Part = Literal["pages", "results"]
ALL_PARTS: frozenset[Part] = frozenset({"pages", "results"})


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything a report shows, read in one go."""

    crawl: CrawlRecord
    summary: Summary
    broken: list[BrokenLink]  # one per broken URL, with its sources
    edges: list[BrokenEdge]  # one per (broken URL, source page)
    pages: list[str] | None = None  # read only when a format needs them
    results: list[ResultRow] | None = None  # read only when a format needs them

    @property
    def pages_per_s(self) -> float:
        """Pages crawled per second of active crawling."""
        return self.summary.pages / self.crawl.elapsed_s if self.crawl.elapsed_s > 0 else 0.0

    def need_pages(self) -> list[str]:
        """The crawled pages; ValueError when they were not loaded."""
        if self.pages is None:
            raise ValueError(_not_loaded("pages"))
        return self.pages

    def need_results(self) -> list[ResultRow]:
        """Every checked URL; ValueError when they were not loaded."""
        if self.results is None:
            raise ValueError(_not_loaded("results"))
        return self.results


@dataclass(frozen=True, slots=True)
class Format:
    """A report format: its name (the ``-f`` choice), renderer and media type."""

    name: str
    render: Callable[[ReportData], str]
    media_type: str
    needs: frozenset[Part] = frozenset()


def _not_loaded(part: str) -> str:
    return f"the report data has no {part}; read it with report.load(conn, crawl_id, fmt)"
