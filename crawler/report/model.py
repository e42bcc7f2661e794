"""What every report format is rendered from, and what a format is.

``ReportData`` is read in one snapshot by ``crawler.report.load``; a format is
a pure function from it to text. Formats that need more than the summary and
the broken links (the crawled pages, every result) say so in ``Format.needs``,
so a report in another format does not read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from crawler.models import RENDERED_PREFIX, CrawlRecord

# What a summary is counted from, in this order (the scans select them so).
COUNT_NAMES = ("ok", "redirected", "broken", "skipped", "excluded", "blocked", "page", "pending")
# The failure kind of a link to page#fragment where the page has no such anchor.
FRAGMENT_KIND = "missing_fragment"


@dataclass(frozen=True, slots=True)
class Summary:
    """How many URLs ended in each class, once redirects are followed."""

    pages: int
    links: int
    ok: int
    redirected: int
    broken: int
    skipped: int
    excluded: int
    pending: int
    blocked: int = 0  # a bot wall answered instead of the page: checked, not broken

    @classmethod
    def from_counts(
        cls, counts: Mapping[str, int], *, redirect_broken: int, fragments_broken: int
    ) -> Summary:
        """From result counts per class (plus "page" and "pending"), either backend.

        A redirect whose chain is broken moves from redirected to broken; a link
        to a missing #fragment is a broken link of its own (its page is ok).
        """
        ok, redirected, broken, skipped, excluded, blocked, pages, pending = (
            int(counts.get(name) or 0) for name in COUNT_NAMES
        )
        redirected -= redirect_broken
        broken += redirect_broken + fragments_broken
        return cls(
            pages=pages,
            links=ok + redirected + broken + blocked,
            ok=ok,
            redirected=redirected,
            broken=broken,
            skipped=skipped,
            excluded=excluded,
            pending=pending,
            blocked=blocked,
        )


@dataclass(frozen=True, slots=True)
class Location:
    """Where a page writes a link: 1-based line and column (characters), None when unknown."""

    source: str
    line: int | None = None
    column: int | None = None

    @property
    def shown(self) -> str:
        """``source:line:column`` as editors and terminals read it, or the source alone."""
        return self.source if self.line is None else f"{self.source}:{self.line}:{self.column}"


# Line and column packed in one integer, so SQL can take the first of a pair's links.
POSITION_SHIFT = 32


def unpack_position(packed: int | None) -> tuple[int | None, int | None]:
    """``(line, column)`` from ``line << POSITION_SHIFT | column``; (None, None) for None."""
    if packed is None:
        return None, None
    return packed >> POSITION_SHIFT, packed & ((1 << POSITION_SHIFT) - 1)


def first_position(a: int | None, b: int | None) -> int | None:
    """The earlier of two packed positions; a known one before an unknown one."""
    if a is None:
        return b
    return a if b is None else min(a, b)


LOCATED_CLASSES = ("broken", "blocked", "redirected")  # results listed with their sources


def locations_of(triples: list[list[Any]] | None) -> list[Location] | None:
    """``[source, line, column]`` triples (one per link) -> the first place per source, sorted."""
    if triples is None:
        return None
    first: dict[str, tuple[int, int] | None] = {}
    for source, line, column in triples:
        where = None if line is None or column is None else (int(line), int(column))
        known = first.get(source)
        if source not in first or (where is not None and (known is None or where < known)):
            first[source] = where
    return [Location(source, *(first[source] or (None, None))) for source in sorted(first)]


@dataclass(slots=True)
class BrokenLink:
    """A broken URL and the pages that link to it.

    ``locations`` has one entry per source, in the same order: the page (or
    file) and where it first writes the link.
    """

    url: str
    status: int | None
    error: str | None
    sources: list[str] = field(default_factory=list)
    locations: list[Location] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BrokenEdge:
    """A broken URL and one page linking to it: the unit most report formats list."""

    url: str
    status: int | None
    error: str | None
    kind: str  # a ``FailureKind`` value, FRAGMENT_KIND or "unknown": why it is broken
    source: str | None  # None for a broken seed, which no page links to
    elements: tuple[str, ...]  # how the source links to it: a, img, script, ...
    # Where the source first writes the link: 1-based line and column (characters),
    # None when unknown. ``file``: the source's path relative to the working
    # directory when it is a local file (``crawler crawl DIR``); ``source`` then
    # already reads ``file:line:column``.
    file: str | None = None
    line: int | None = None
    column: int | None = None

    @property
    def rendered(self) -> bool:
        """Found only in the page's rendered DOM (``--render``): a plain crawler misses it."""
        return bool(self.elements) and all(e.startswith(RENDERED_PREFIX) for e in self.elements)

    @property
    def shown_source(self) -> str | None:
        """The source as people read it: ``source:line:column`` when the line is known."""
        if self.source is None or self.line is None or self.file is not None:
            return self.source
        return f"{self.source}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class RenderIssueRow:
    """Something that went wrong while a page was rendered (``--render``)."""

    page: str
    kind: str  # see crawler.models.RenderIssue
    message: str
    url: str | None  # the request, for request_failed and request_refused


@dataclass(frozen=True, slots=True)
class HeadOverruled:
    """A link whose HEAD answer a confirming GET overruled: only the GET's counts."""

    url: str
    head_status: int
    status: int | None  # the GET's


class Cursor(NamedTuple):
    """A position in ``iter_results``: results come in (checked_at, url_id) order."""

    checked_at: float
    url_id: int


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One checked URL; class, status and error as ``resolved`` has them (redirects followed)."""

    url_id: int
    url: str
    result_class: str
    status: int | None
    error: str | None
    content_type: str | None
    elapsed_ms: int | None
    checked_at: float
    # For a broken, blocked or redirected URL: the pages linking to it and where
    # each first writes it (sorted by source); None for the other classes.
    locations: list[Location] | None = None

    @property
    def cursor(self) -> Cursor:
        """Pass this to ``iter_results`` to continue after this row."""
        return Cursor(self.checked_at, self.url_id)


# The failure kind of a broken redirect is its chain's: a loop, too long, or

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
    head_overruled: list[HeadOverruled] = field(default_factory=list)  # sorted by URL
    render_issues: list[RenderIssueRow] = field(default_factory=list)  # by page, in order

    def rendered_edges(self) -> set[tuple[str, str | None]]:
        """(broken URL, source) of the broken links found only after rendering."""
        return {(e.url, e.source) for e in self.edges if e.rendered}

    @property
    def ok(self) -> bool:
        """No broken link (what exit code 0 means)."""
        return self.summary.broken == 0

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
