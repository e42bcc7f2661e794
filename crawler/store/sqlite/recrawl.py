"""What a SQLite re-crawl reads of the crawl it starts from, and what it keeps for the next.

``save_validators`` keeps the ETag / Last-Modified of pages crawled OK (in
the completing transaction); ``previous_pages`` reads, for a batch of page
URLs, what the previous crawl stored for them: validators, result, links
(both link tables, by source) and anchors. Both are the SQLite statements
behind ``FrontierStore.previous_pages``' meaning (crawler/store/contract.py).

The previous crawl's open links still appended to ``link_fresh`` (which has
no index) were moved into ``link_open`` when the re-crawl's store first asked
which crawl it re-crawls (``Frontier.previous_crawl``); a finished crawl
appends no more.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Sequence

from crawler.models import PreviousLink, PreviousPage
from crawler.store.sqlite import bulk

CHUNK = 400  # bound parameters per IN (...)

_PAGES = """
SELECT u.url, u.id, v.etag, v.last_modified, r.status, r.content_type, r.bytes
FROM url u
JOIN page_validator v ON v.url_id = u.id
JOIN result r         ON r.url_id = u.id
WHERE u.crawl_id = ? AND r.class = 'ok' AND u.url IN ({marks})
"""
# Positions are decoded here, as the views do (migration 0015), not per link in Python.
_POSITION = """CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END"""
# A batch of pages' links, by source (the previous crawl's link rows are never 'redirect').
LINKS_BY_SOURCE = f"""
SELECT l.source_id, t.url, l.element, l.fragment, {_POSITION}
FROM link_open l JOIN url t ON t.id = l.target_id
WHERE l.source_id IN ({{marks}}) AND l.element <> 'redirect'
UNION ALL
SELECT l.source_id, t.url, l.element, l.fragment, {_POSITION}
FROM link_settled l JOIN url t ON t.id = l.target_id
WHERE l.source_id IN ({{marks}})
"""
_ANCHORS = "SELECT url_id, name FROM anchor WHERE url_id IN ({marks})"


def previous_crawl_id(conn: sqlite3.Connection, crawl_id: int) -> int | None:
    """The crawl this one re-crawls, None for a full crawl."""
    row = conn.execute("SELECT previous_crawl_id FROM crawl WHERE id = ?", (crawl_id,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def save_validators(
    conn: sqlite3.Connection, url_id: int, etag: str | None, modified: str | None
) -> None:
    """Keep a page's validators (replacing a value an earlier attempt stored)."""
    conn.execute(
        "INSERT INTO page_validator (url_id, etag, last_modified) VALUES (?, ?, ?) "
        "ON CONFLICT (url_id) DO UPDATE SET etag = excluded.etag, "
        "last_modified = excluded.last_modified",
        (url_id, etag, modified),
    )


def previous_links(conn: sqlite3.Connection, pages: Sequence[int]) -> dict[int, list[PreviousLink]]:
    """The links recorded from these pages (rows of the previous crawl), by page."""
    links: defaultdict[int, list[PreviousLink]] = defaultdict(list)
    for start in range(0, len(pages), CHUNK):
        chunk = pages[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        for source, *link in conn.execute(LINKS_BY_SOURCE.format(marks=marks), (*chunk, *chunk)):
            links[source].append(tuple(link))
    return links


def previous_pages(
    conn: sqlite3.Connection, previous_id: int, urls: Sequence[str], *, with_links: bool = True
) -> dict[str, PreviousPage]:
    """What crawl ``previous_id`` stored for these pages; pages without validators are left out."""
    found: dict[str, PreviousPage] = {}
    for start in range(0, len(urls), CHUNK):
        found.update(_chunk(conn, previous_id, urls[start : start + CHUNK], with_links))
    return found


def _chunk(
    conn: sqlite3.Connection, previous_id: int, urls: Sequence[str], with_links: bool
) -> dict[str, PreviousPage]:
    marks = ",".join("?" * len(urls))
    # One JSON row each, not a row each (``bulk.select``): this reads beside the event loop.
    rows = bulk.select(conn, _PAGES.format(marks=marks), (previous_id, *urls), 7)
    if not rows:
        return {}
    ids = [row[1] for row in rows]
    id_marks = ",".join("?" * len(ids))
    links = previous_links(conn, ids) if with_links else {}
    anchors: defaultdict[int, set[str]] = defaultdict(set)
    for url_id, name in bulk.select(conn, _ANCHORS.format(marks=id_marks), ids, 2):
        anchors[url_id].add(name)
    return {
        url: PreviousPage(
            url=url,
            etag=etag,
            last_modified=modified,
            status=status,
            content_type=content_type,
            bytes=size,
            links=tuple(sorted(links.get(url_id, ()), key=lambda link: link[:3])),
            anchors=frozenset(anchors[url_id] - {""}) if url_id in anchors else None,
            row=url_id,
        )
        for url, url_id, etag, modified, status, content_type, size in rows
    }
