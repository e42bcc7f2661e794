"""Read-side queries: the numbers and lists every report format is rendered from.

Everything here reads; it runs on its own connection so a report never waits
for the crawl and works while the crawl runs.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field


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


@dataclass(slots=True)
class BrokenLink:
    """A broken URL and the pages that link to it."""

    url: str
    status: int | None
    error: str | None
    sources: list[str] = field(default_factory=list)


def summary(conn: sqlite3.Connection, crawl_id: int) -> Summary:
    """Counts per class; one scan of the crawl's rows plus the redirect chains."""
    row = conn.execute(
        "SELECT SUM(r.class = 'ok'), SUM(r.class = 'redirected'), SUM(r.class = 'broken'), "
        "SUM(r.class = 'skipped'), SUM(r.class = 'excluded'), "
        "SUM(u.kind = 2 AND r.class = 'ok'), SUM(u.state <> 2) "
        "FROM url u LEFT JOIN result r ON r.url_id = u.id WHERE u.crawl_id = ?",
        (crawl_id,),
    ).fetchone()
    ok, redirected, broken, skipped, excluded, pages, pending = (v or 0 for v in row)
    # A redirect whose chain loops, is too long, or ends broken is broken.
    (redirect_broken,) = conn.execute(
        "SELECT count(*) FROM resolved rv JOIN result r ON r.url_id = rv.url_id "
        "WHERE rv.crawl_id = ? AND r.class = 'redirected' AND rv.class = 'broken'",
        (crawl_id,),
    ).fetchone()
    redirected -= redirect_broken
    broken += redirect_broken
    return Summary(
        pages=pages,
        links=ok + redirected + broken,
        ok=ok,
        redirected=redirected,
        broken=broken,
        skipped=skipped,
        excluded=excluded,
        pending=pending,
    )


def broken_links(conn: sqlite3.Connection, crawl_id: int) -> list[BrokenLink]:
    """Broken links with their source pages, sorted by URL; sources sorted too."""
    found: dict[str, BrokenLink] = {}
    sources: defaultdict[str, set[str]] = defaultdict(set)
    for url, status, error, source in conn.execute(
        "SELECT url, status, error, source FROM broken_links WHERE crawl_id = ?", (crawl_id,)
    ):
        if url not in found:
            found[url] = BrokenLink(url=url, status=status, error=error)
        if source is not None:
            sources[url].add(source)
    for url, link in found.items():
        link.sources = sorted(sources[url])
    return [found[url] for url in sorted(found)]
