"""What changed between two crawls of a site: the read model of ``crawler diff``.

``CrawlDiff`` is computed by ``compare`` from two crawls' broken links (with
their sources) and crawled pages, read by ``crawler.store.open.load_diff`` in
one snapshot from either backend. Pure: values in, values out. A link is
identified by its URL: newly broken when broken in the later crawl only,
fixed when broken in the earlier one only (mended, or no longer linked),
still broken when broken in both. Pages are the pages each crawl crawled
(the ones its summary counts).

``pick_pair`` decides which crawls are compared when the user does not say:
the last two finished crawls of the same seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from crawler.errors import UsageError
from crawler.report.model import BrokenLink

COUNT_KEYS = ("new_broken", "fixed", "still_broken", "pages_added", "pages_removed")


@dataclass(frozen=True)
class CrawlDiff:
    """Two crawls compared: links that broke, were fixed or stay broken; pages added, removed.

    Broken links are sorted by URL, with their sources (sorted) in the crawl
    that shows them broken: ``to_crawl``'s for new and still broken links,
    ``from_crawl``'s for fixed ones. ``from_crawl`` is 0 when there was no
    earlier crawl to compare with (every broken link is then new).
    """

    from_crawl: int
    to_crawl: int
    new_broken: list[BrokenLink] = field(default_factory=list)
    fixed: list[BrokenLink] = field(default_factory=list)
    still_broken: list[BrokenLink] = field(default_factory=list)
    pages_added: list[str] = field(default_factory=list)
    pages_removed: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """How many of each change, keyed as ``COUNT_KEYS``."""
        return {
            "new_broken": len(self.new_broken),
            "fixed": len(self.fixed),
            "still_broken": len(self.still_broken),
            "pages_added": len(self.pages_added),
            "pages_removed": len(self.pages_removed),
        }

    @property
    def changed(self) -> bool:
        """Did anything change besides links that stay broken?"""
        counts = self.counts()
        return any(n for key, n in counts.items() if key != "still_broken")


@dataclass(frozen=True, slots=True)
class CrawlEntry:
    """What ``pick_pair`` needs of a recorded crawl."""

    id: int
    seeds: tuple[str, ...]
    finished: bool


def compare(
    from_crawl: int,
    to_crawl: int,
    before: Sequence[BrokenLink],
    after: Sequence[BrokenLink],
    pages_before: Sequence[str],
    pages_after: Sequence[str],
) -> CrawlDiff:
    """The diff of two crawls from their broken links and pages."""
    old = {link.url: link for link in before}
    new = {link.url: link for link in after}
    earlier, later = set(pages_before), set(pages_after)
    return CrawlDiff(
        from_crawl=from_crawl,
        to_crawl=to_crawl,
        new_broken=[new[url] for url in sorted(new.keys() - old.keys())],
        fixed=[old[url] for url in sorted(old.keys() - new.keys())],
        still_broken=[new[url] for url in sorted(new.keys() & old.keys())],
        pages_added=sorted(later - earlier),
        pages_removed=sorted(earlier - later),
    )


def pick_pair(
    crawls: Sequence[CrawlEntry], from_crawl: int | None, to_crawl: int | None
) -> tuple[int | None, int]:
    """(from, to): the given ids, else the last finished crawl and the finished one before it
    with the same seeds. ``from`` is None when ``to`` has no earlier crawl of its seeds.
    """
    by_id = {entry.id: entry for entry in crawls}
    for given in (from_crawl, to_crawl):
        if given is not None and given not in by_id:
            raise UsageError(f"no crawl with id {given} in this database")
    if to_crawl is None:
        finished = [entry.id for entry in crawls if entry.finished]
        if not finished:
            raise UsageError("the database holds no finished crawl to compare")
        to_crawl = max(finished)
    if from_crawl is not None:
        return from_crawl, to_crawl
    return previous_of(crawls, to_crawl), to_crawl


def previous_of(crawls: Sequence[CrawlEntry], crawl_id: int) -> int | None:
    """The last finished crawl before ``crawl_id`` with the same seeds, if any."""
    by_id = {entry.id: entry for entry in crawls}
    seeds = sorted(by_id[crawl_id].seeds) if crawl_id in by_id else None
    earlier = [
        entry.id
        for entry in crawls
        if entry.id < crawl_id and entry.finished and sorted(entry.seeds) == seeds
    ]
    return max(earlier) if earlier else None
