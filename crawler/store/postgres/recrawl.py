"""What a PostgreSQL re-crawl reads of the crawl it starts from, and what it keeps for the next.

The same meaning as ``crawler.store.sqlite.recrawl`` (``FrontierStore.previous_pages``
in crawler/store/contract.py), in array statements: validators of the pages
crawled OK are upserted with the batch's results; a batch of page URLs reads
their validators, results, links (every link table, by source) and anchors in
three statements. A page answered 304 is completed by reference
(``Outcome.recorded``): ``expanded`` reads its links in the completing
transaction and classifies them in Python (``crawler.recrawl.expand``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from crawler.models import Outcome, PreviousLink, PreviousPage
from crawler.recrawl import expand_all

_PAGES = """
SELECT u.url, u.id, v.etag, v.last_modified, r.status, r.content_type, r.bytes
FROM url u
JOIN page_validator v ON v.url_id = u.id
JOIN result r         ON r.url_id = u.id
WHERE u.crawl_id = $1 AND r.class = 'ok' AND u.url = ANY($2::text[])
"""
_LINKS = """
SELECT l.source_id, t.url, l.element, l.fragment, l.line, l.col
FROM link_open l JOIN url t ON t.id = l.target_id
WHERE l.source_id = ANY($1::bigint[]) AND l.element <> 'redirect'
UNION ALL
SELECT l.source_id, t.url, l.element, l.fragment, l.line, l.col
FROM link_settled l JOIN url t ON t.id = l.target_id
WHERE l.source_id = ANY($1::bigint[])
UNION ALL
SELECT p.source_id, t.url, x.element, '', x.line, x.col
FROM link_settled_page p
CROSS JOIN LATERAL unnest(p.target_ids, p.elements, p.lines, p.cols)
    AS x (target_id, element, line, col)
JOIN url t ON t.id = x.target_id
WHERE p.source_id = ANY($1::bigint[])
"""
_ANCHORS = "SELECT url_id, name FROM anchor WHERE url_id = ANY($1::bigint[])"
_SAVE = """
INSERT INTO page_validator (url_id, etag, last_modified)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])
ON CONFLICT (url_id) DO UPDATE SET etag = excluded.etag, last_modified = excluded.last_modified
"""

Validators = tuple[int, str | None, str | None]  # (url id, etag, last modified)


async def previous_crawl_id(conn: Any, crawl_id: int) -> int | None:
    """The crawl this one re-crawls, None for a full crawl."""
    found = await conn.fetchval("SELECT previous_crawl_id FROM crawl WHERE id = $1", crawl_id)
    return None if found is None else int(found)


async def save_validators(conn: Any, rows: list[Validators]) -> None:
    """Keep pages' validators, in the caller's transaction."""
    if not rows:
        return
    rows.sort(key=lambda row: row[0])
    await conn.execute(_SAVE, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


async def previous_links(conn: Any, pages: Sequence[int]) -> dict[int, list[PreviousLink]]:
    """The links recorded from these pages (rows of the previous crawl), by page."""
    links: defaultdict[int, list[PreviousLink]] = defaultdict(list)
    for source_id, target, element, fragment, line, column in await conn.fetch(_LINKS, list(pages)):
        links[int(source_id)].append((target, element, fragment, line, column))
    return links


async def expanded(conn: Any, outcomes: Sequence[Outcome]) -> list[Outcome]:
    """The outcomes of pages answered 304 with their recorded links as children."""
    pages = [o.recorded.page for o in outcomes if o.recorded is not None]
    if not pages:
        return list(outcomes)
    return expand_all(outcomes, await previous_links(conn, pages))


async def previous_pages(
    conn: Any, previous_id: int, urls: Sequence[str], *, with_links: bool = True
) -> dict[str, PreviousPage]:
    """What crawl ``previous_id`` stored for these pages; pages without validators are left out."""
    rows = await conn.fetch(_PAGES, previous_id, list(urls))
    if not rows:
        return {}
    ids = [int(row[1]) for row in rows]
    links = await previous_links(conn, ids) if with_links else {}
    anchors: defaultdict[int, set[str]] = defaultdict(set)
    for url_id, name in await conn.fetch(_ANCHORS, ids):
        anchors[int(url_id)].add(name)
    found = {}
    for url, url_id, etag, modified, status, content_type, size in rows:
        key = int(url_id)
        found[url] = PreviousPage(
            url=url,
            etag=etag,
            last_modified=modified,
            status=status,
            content_type=content_type,
            bytes=None if size is None else int(size),
            links=tuple(sorted(links.get(key, ()), key=lambda link: link[:3])),
            anchors=frozenset(anchors[key] - {""}) if key in anchors else None,
            row=key,
        )
    return found
