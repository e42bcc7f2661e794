"""What a writer remembers of its crawl's URLs: their row, kind and settledness.

Every link a page holds is looked up here before the ``url`` table: a miss
costs the writer an index probe, and once a crawl outgrows the cache most
links miss (a page links pages found long before). So the cache is sized in
URLs per byte: two generations of plain dicts whose values are one packed int
(``pack``) take about 0.57 of the memory of an ``OrderedDict`` of tuples per
URL (bench/RESULTS.md, session 39), and a URL the cache drops is only probed
again. Entries are added to the young generation and a hit in the old one
moves there; when the young one is full the old one is dropped. Once the
cache is full, a new URL that is only checked enters it when found again, not
at once (``put_new``): most such URLs (a page's own images) are never linked
again, and would push out the pages that are.

An entry stays true whatever other writers do: rows are never deleted during
a crawl, kinds only grow and a settled row stays settled.
"""

from __future__ import annotations

from crawler.models import UrlKind

# A URL's entry: row id << 3 | kind << 1 | settled (kind is a UrlKind, 0-3).
KIND_SHIFT = 1
ID_SHIFT = 3


def pack(url_id: int, kind: int, settled: int | bool) -> int:
    """One int for (id, kind, settled): a tuple of three costs twice its memory."""
    return url_id << ID_SHIFT | kind << KIND_SHIFT | (1 if settled else 0)


def row_id(entry: int) -> int:
    return entry >> ID_SHIFT


def kind_of(entry: int) -> int:
    return entry >> KIND_SHIFT & 3


def is_settled(entry: int) -> bool:
    return bool(entry & 1)


class UrlCache:
    """A bounded map of URL -> packed entry that drops the least recently used half first."""

    def __init__(self, capacity: int) -> None:
        self._young: dict[str, int] = {}
        self._old: dict[str, int] = {}
        self._half = max(1, capacity // 2)
        # Whether an entry was ever dropped: until then the cache holds every
        # URL put into it, which the SQLite writer's "whole crawl" test needs.
        self.dropped = False

    @property
    def capacity(self) -> int:
        return 2 * self._half

    def get(self, url: str) -> int | None:
        """The URL's entry, or None; a hit in the old generation moves to the young one."""
        entry = self._young.get(url)
        if entry is None:
            entry = self._old.pop(url, None)  # moved, not copied: no URL held twice
            if entry is not None:
                self.put(url, entry)
        return entry

    def __contains__(self, url: str) -> bool:
        return url in self._young or url in self._old

    def put(self, url: str, entry: int) -> None:
        young = self._young
        young[url] = entry
        if len(young) >= self._half:
            if self._old:
                self.dropped = True
            self._old = young
            self._young = {}

    def put_new(self, url: str, entry: int) -> bool:
        """A URL just added to the crawl; False when it is left out (see the module docstring)."""
        if self.dropped and kind_of(entry) == UrlKind.CHECK:
            return False
        self.put(url, entry)
        return True

    def settle(self, url: str) -> None:
        """``url`` was crawled OK as a page: links to it are settled from now on."""
        entry = self.get(url)
        if entry is not None:
            self.put(url, entry | 1)

    def resize(self, capacity: int) -> None:
        """A new bound; what it held is dropped (tests shrink it so the database's key dedups)."""
        self._half = max(1, capacity // 2)
        if len(self):
            self.dropped = True
            self.clear()

    def clear(self) -> None:
        self._young.clear()
        self._old.clear()

    def __len__(self) -> int:
        """Entries held (a URL put again while in the old generation counts twice)."""
        return len(self._young) + len(self._old)
