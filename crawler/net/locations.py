"""Reports of a local site name files, not ``http://local.invalid/`` URLs.

A crawl of a directory (``crawler crawl public`` or ``--root-dir``) stores its
pages under the site's home URL; a person reading a report, and GitHub code
scanning reading SARIF, want the file in the repository and the line. Before a
report is rendered, each local URL becomes its file's path relative to the
working directory, and each broken link's source gets the line and column
where the link is written, as the crawl stored it (``public/index.html:12:5``).
A crawl stored before positions were (migration 0015) has none: they are then
found in the few files that have broken links (``crawler.positions``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from crawler import positions
from crawler.config import CrawlSettings
from crawler.errors import UsageError
from crawler.net import localsite, storable
from crawler.net.localsite import LocalSite
from crawler.report import ReportData
from crawler.report.diff import CrawlDiff
from crawler.report.model import BrokenEdge, BrokenLink, Location
from crawler.scope import parse_remap


def local_site_of(seeds: Sequence[str], config: dict[str, Any]) -> LocalSite | None:
    """A crawl's local site from its recorded seeds and settings (None: it crawled URLs,
    or the directory is gone)."""
    try:
        settings = CrawlSettings.model_validate(config)
        root = localsite.site_root(list(seeds), settings.root_dir)
    except (ValueError, UsageError, OSError):
        return None
    if root is None or not root.is_dir():
        return None
    return LocalSite.build(root, settings)


def report_named(data: ReportData, cwd: Path | None = None) -> ReportData:
    """The report as shown: a local site's URLs as files from ``cwd`` (the CLI's working
    directory; the site's root, for the service), each broken link's line and column."""
    site = local_site_of(data.crawl.seeds, data.crawl.config)
    return data if site is None else with_files(data, site, cwd or site.root)


def diff_named(
    diff: CrawlDiff, seeds: Sequence[str], config: dict[str, Any], cwd: Path | None = None
) -> CrawlDiff:
    """The diff as shown: ``report_named``'s naming, for the crawl of these seeds."""
    site = local_site_of(seeds, config)
    return diff if site is None else diff_with_files(diff, site, cwd or site.root)


def diff_with_files(diff: CrawlDiff, site: LocalSite, cwd: Path) -> CrawlDiff:
    """The diff with local URLs as paths (``/`` and ``/index.html``: one file, named once)."""
    paths = _Paths(site, cwd, ())

    def links(found: list[BrokenLink]) -> list[BrokenLink]:
        named = [
            BrokenLink(
                paths.name(link.url),
                link.status,
                link.error,
                sorted({paths.name(source) for source in link.sources}),
            )
            for link in found
        ]
        return sorted(named, key=lambda link: link.url)  # sorted as CrawlDiff keeps them

    def pages(found: list[str]) -> list[str]:
        return sorted({paths.name(page) for page in found})

    return dataclasses.replace(
        diff,
        new_broken=links(diff.new_broken),
        fixed=links(diff.fixed),
        still_broken=links(diff.still_broken),
        pages_added=pages(diff.pages_added),
        pages_removed=pages(diff.pages_removed),
    )


def with_files(data: ReportData, site: LocalSite, cwd: Path) -> ReportData:
    """The report with local URLs as paths and broken links' sources as path:line:column."""
    settings = CrawlSettings.model_validate(data.crawl.config)
    paths = _Paths(site, cwd, tuple(parse_remap(e) for e in settings.remap))
    shown_edges = [paths.edge(edge) for edge in data.edges]
    shown = {(old.url, old.source): new for old, new in zip(data.edges, shown_edges, strict=True)}
    broken = []
    for link in data.broken:
        named: dict[tuple[str, Location], None] = {}
        for source in link.sources:
            edge = shown.get((link.url, source))
            if edge is None or edge.source is None:
                named[paths.name(source), Location(paths.name(source))] = None
            else:
                where = Location(edge.file or edge.source, edge.line, edge.column)
                named[edge.source, where] = None
        sources = [source for source, _ in named]
        locations = [where for _, where in named]
        broken.append(BrokenLink(paths.name(link.url), link.status, link.error, sources, locations))
    # A directory and its index file are two URLs of one file (``/`` and
    # ``/index.html``): crawled as two pages, listed as one.
    edges = list(dict.fromkeys(shown_edges))
    pages = list(dict.fromkeys(map(paths.name, data.pages))) if data.pages is not None else None
    results = (
        [
            dataclasses.replace(
                row,
                url=paths.name(row.url),
                locations=None
                if row.locations is None
                else list(
                    dict.fromkeys(
                        dataclasses.replace(w, source=paths.name(w.source)) for w in row.locations
                    )
                ),
            )
            for row in data.results
        ]
        if data.results is not None
        else None
    )
    return dataclasses.replace(data, edges=edges, broken=broken, pages=pages, results=results)


class _Paths:
    """Local URL -> display path, and link positions per source file (each read once)."""

    def __init__(self, site: LocalSite, cwd: Path, remaps: positions.Remaps) -> None:
        self._site = site
        self._cwd = cwd
        self._remaps = remaps
        self._positions: dict[str, dict[str, positions.Position]] = {}

    def name(self, url: str) -> str:
        """A local URL as a path relative to the working directory; others unchanged."""
        if not self._site.contains(url):
            return url
        parts = urlsplit(url)
        tail = f"#{parts.fragment}" if parts.fragment else ""
        found = self._site.file_for(url)
        if found is not None:
            return self._relative(found) + tail
        prefix = urlsplit(self._site.home).path
        path = unquote(parts.path)
        path = path[len(prefix) :] if path.startswith(prefix) else path.lstrip("/")
        shown = self._relative(self._site.root / path) + ("/" if path.endswith("/") else "")
        return shown + tail

    def edge(self, edge: BrokenEdge) -> BrokenEdge:
        """The edge with its URL and source as paths, and the source's line and column."""
        url = self.name(edge.url)
        if edge.source is None or not self._site.contains(edge.source):
            return dataclasses.replace(edge, url=url)
        found = self._site.file_for(edge.source)
        if found is None:
            return dataclasses.replace(edge, url=url, source=self.name(edge.source))
        file = self._relative(found)
        if edge.line is not None and edge.column is not None:  # stored by the crawl
            where: positions.Position | None = positions.Position(edge.line, edge.column)
        else:
            where = self._where(edge.source, found).get(edge.url)
        if where is None:
            return dataclasses.replace(edge, url=url, source=file, file=file)
        return dataclasses.replace(
            edge,
            url=url,
            source=f"{file}:{where.line}:{where.column}",
            file=file,
            line=where.line,
            column=where.column,
        )

    def _where(self, source: str, found: Path) -> dict[str, positions.Position]:
        if source not in self._positions:
            try:
                text = found.read_bytes().decode("utf-8", "replace")
            except OSError:
                text = ""
            self._positions[source] = positions.link_positions(text, source, self._remaps)
        return self._positions[source]

    def _relative(self, path: Path) -> str:
        try:
            shown = os.path.relpath(path, self._cwd)
        except ValueError:  # another drive (Windows)
            shown = str(path)
        if shown.startswith(".."):
            shown = str(path)
        # A file name that is not UTF-8 is shown with U+FFFD: it is printed and stored.
        return storable.text(shown.replace(os.sep, "/")) or ""
