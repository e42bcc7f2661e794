"""The read side on PostgreSQL: a crawl's ``ReportData``, the same rows as SQLite's.

Every report format renders from ``ReportData``, so each works unchanged on
either backend; tests/store/test_contract_report.py holds both to the same
rows. The questions are ``crawler.store.sqlite.results``' and read the same
views (``resolved``, ``broken_links``, ``broken_fragments``), in one
``REPEATABLE READ`` read-only transaction: one snapshot, even while workers
write. What the end of a crawl reads does not grow with the crawl: the counts
come from ``crawl_count`` (migration 0006), broken links start from the broken
results and the redirects, fragments are read only when anchors were recorded.
Sorting that SQLite does by byte order is done here in Python (code point
order, the same), so a database collation cannot reorder a report.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from crawler import report as formats
from crawler.models import UrlKind
from crawler.report import ReportData
from crawler.report.model import (
    COUNT_NAMES,
    FRAGMENT_KIND,
    LOCATED_CLASSES,
    POSITION_SHIFT,
    BrokenEdge,
    BrokenLink,
    HeadOverruled,
    Location,
    RenderIssueRow,
    ResultRow,
    Summary,
    first_position,
    locations_of,
    unpack_position,
)
from crawler.store.postgres import crawls, vacuum

_IS_PAGE = f"u.kind = {int(UrlKind.PAGE)} AND r.class = 'ok'"

# The counts by scanning every URL: only for a database not migrated to 0006
# (a reader does not migrate).
_SUMMARY_BY_SCAN = f"""
SELECT count(*) FILTER (WHERE r.class = 'ok'), count(*) FILTER (WHERE r.class = 'redirected'),
       count(*) FILTER (WHERE r.class = 'broken'), count(*) FILTER (WHERE r.class = 'skipped'),
       count(*) FILTER (WHERE r.class = 'excluded'), count(*) FILTER (WHERE r.class = 'blocked'),
       count(*) FILTER (WHERE {_IS_PAGE}), count(*) FILTER (WHERE u.state <> 2)
FROM url u LEFT JOIN result r ON r.url_id = u.id WHERE u.crawl_id = $1
"""

# Pending and leased rows, from their partial indexes: none at the end of a crawl.
_OUTSTANDING = """
SELECT (SELECT count(*) FROM url WHERE crawl_id = $1 AND state = 0)
     + (SELECT count(*) FROM url WHERE crawl_id = $1 AND state = 1)
"""

# A redirect whose chain loops, is too long, or ends broken is broken (as in
# the ``resolved`` view). The chains start from the redirects' partial index;
# each is looked up by key (scalar subqueries), so the planner cannot choose
# to read every result of the crawl instead, whatever its statistics say.
_REDIRECT_BROKEN = """
SELECT count(*) FROM redirect_chain rc
WHERE (SELECT crawl_id FROM url WHERE id = rc.url_id) = $1
  AND (SELECT class FROM result WHERE url_id = rc.url_id) = 'redirected'
  AND (rc.is_loop
       OR rc.hops > (SELECT COALESCE((config ->> 'max_redirects')::integer, 10)
                     FROM crawl WHERE id = $1)
       OR (SELECT class FROM result WHERE url_id = rc.final_id) = 'broken')
"""

# {at}: a link's line and column packed in one bigint (NULL before migration 0015).
_AT = f"(line::bigint << {POSITION_SHIFT}) + col"

# Broken links, then (only when some crawl recorded anchors) missing fragments.
# Each broken link's URL is looked up by key (LATERAL, LIMIT: not flattened), never
# a scan of url joined to the view, whatever the planner makes of its estimates.
_EDGES = """
SELECT bl.url, bl.status, bl.error, bl.source, bl.element, {at},
       CASE
           WHEN rc.url_id IS NULL THEN r.error_kind
           WHEN rc.is_loop THEN 'redirect_loop'
           WHEN bl.error LIKE 'too many redirects%' THEN 'too_many_redirects'
           ELSE fr.error_kind
       END AS kind
FROM (SELECT * FROM broken_links WHERE crawl_id = $1) bl
CROSS JOIN LATERAL (SELECT id FROM url WHERE crawl_id = bl.crawl_id AND url = bl.url LIMIT 1) u
LEFT JOIN result r          ON r.url_id = u.id
LEFT JOIN redirect_chain rc ON rc.url_id = u.id
LEFT JOIN result fr         ON fr.url_id = rc.final_id
WHERE bl.crawl_id = $1
"""
_FRAGMENT_EDGES = f"""
UNION ALL
SELECT url, status, error, source, element, {{at}}, '{FRAGMENT_KIND}' AS kind
FROM broken_fragments WHERE crawl_id = $1
"""

_PAGES = f"""
SELECT u.url FROM url u JOIN result r ON r.url_id = u.id WHERE u.crawl_id = $1 AND {_IS_PAGE}
"""

# {located}: as SQLite's, a JSON array of [source, line, column] per link.
_RESULTS = """
SELECT r.url_id, u.url, rv.class, rv.status, rv.error, r.content_type, r.elapsed_ms, r.checked_at,
       {located}
FROM result r
JOIN url u       ON u.id = r.url_id
JOIN resolved rv ON rv.url_id = r.url_id
WHERE u.crawl_id = $1
ORDER BY r.checked_at, r.url_id
"""


async def load(conn: Any, crawl_id: int | None = None, fmt: str | None = None) -> ReportData:
    """Read the report of a crawl (the latest when no id is given), as ``report.load``."""
    needs = formats.get(fmt).needs if fmt is not None else formats.ALL_PARTS
    await vacuum.analyze_unanalyzed(conn)  # the plans below start from few rows only if known
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        crawl = await crawls.get(conn, crawl_id)
        rows = await _edge_rows(conn, crawl.id)  # read once: broken links and edges alike
        return ReportData(
            crawl=crawl,
            summary=await summary(conn, crawl.id),
            broken=await broken_links(conn, crawl.id, rows),
            edges=await broken_edges(conn, crawl.id, rows),
            pages=await pages(conn, crawl.id) if "pages" in needs else None,
            results=await results(conn, crawl.id) if "results" in needs else None,
            head_overruled=await head_overruled(conn, crawl.id),
            render_issues=await render_issues(conn, crawl.id),
        )


async def render_issues(conn: Any, crawl_id: int) -> list[RenderIssueRow]:
    """What went wrong on rendered pages, by page URL (code points), in the order it happened."""
    if await conn.fetchval("SELECT to_regclass('render_issue') IS NULL"):
        return []  # not migrated yet (a reader does not migrate)
    rows = await conn.fetch(
        "SELECT u.url, ri.seq, ri.kind, ri.message, ri.target FROM render_issue ri "
        "JOIN url u ON u.id = ri.url_id WHERE u.crawl_id = $1",
        crawl_id,
    )
    ordered = sorted(rows, key=lambda r: (r[0], r[1]))
    return [RenderIssueRow(r[0], r[2], r[3], r[4]) for r in ordered]


async def head_overruled(conn: Any, crawl_id: int) -> list[HeadOverruled]:
    """Links whose HEAD answer a confirming GET overruled, sorted by URL (code points)."""
    rows = await conn.fetch(
        "SELECT u.url, r.head_status, r.status FROM result r JOIN url u ON u.id = r.url_id "
        "WHERE r.head_status IS NOT NULL AND u.crawl_id = $1",
        crawl_id,
    )
    found = [HeadOverruled(r[0], int(r[1]), None if r[2] is None else int(r[2])) for r in rows]
    return sorted(found, key=lambda h: h.url)


async def summary(conn: Any, crawl_id: int) -> Summary:
    """Counts per class, redirects followed, missing fragments counted as broken.

    The counts come from ``crawl_count`` (kept by triggers), not from a scan
    of the crawl's URLs: reading them costs the same at any size of crawl.
    """
    if await conn.fetchval("SELECT to_regclass('crawl_count') IS NULL"):
        row = await conn.fetchrow(_SUMMARY_BY_SCAN, crawl_id)
        counts = {name: int(v or 0) for name, v in zip(COUNT_NAMES, row, strict=True)}
    else:
        counts = {
            name: int(n)
            for name, n in await conn.fetch(
                "SELECT name, sum(n) FROM crawl_count WHERE crawl_id = $1 GROUP BY name",
                crawl_id,
            )
        }
        counts["pending"] = int(await conn.fetchval(_OUTSTANDING, crawl_id))
    fragments = 0
    if await _has_anchors(conn):
        fragments = await conn.fetchval(
            "SELECT count(DISTINCT url) FROM broken_fragments WHERE crawl_id = $1", crawl_id
        )
    return Summary.from_counts(
        counts,
        redirect_broken=int(await conn.fetchval(_REDIRECT_BROKEN, crawl_id)),
        fragments_broken=int(fragments),
    )


async def _has_anchors(conn: Any) -> bool:
    """Whether any crawl recorded anchors (--include-fragments); else no fragment is broken."""
    return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM anchor)"))


async def _edge_rows(conn: Any, crawl_id: int) -> list[Any]:
    """One row per broken link (and missing fragment): URL, status, error, source, element,
    packed position, failure kind. Both ``broken_links`` and ``broken_edges`` are made of
    them: the open links not merged yet (``link_fresh``, no index) are read once."""
    query = _EDGES + (_FRAGMENT_EDGES if await _has_anchors(conn) else "")
    at = await _position(conn)
    await _set(conn, _EDGE_SETTINGS)
    try:
        return list(await conn.fetch(query.format(at=at), crawl_id))
    finally:
        await _set(conn, {name: "on" for name in _EDGE_SETTINGS})


# How the broken links are read. Every table but link_fresh is reached by key
# from the few broken URLs; estimates made without statistics (``result`` is
# never analyzed while autovacuum is off) chose a scan of every URL of the
# crawl instead. The broken URLs are deduplicated by sorting, not hashing: they
# come out in id order, so each run of ``link_open`` is probed in the order of
# its target index, whose pages are read once each and in file order.
_EDGE_SETTINGS = {"enable_seqscan": "off", "enable_hashagg": "off"}


async def _set(conn: Any, settings: dict[str, str]) -> None:
    """Planner settings for the rest of the caller's transaction."""
    await conn.execute(
        "SELECT set_config(name, value, true) "
        "FROM unnest($1::text[], $2::text[]) AS s (name, value)",
        list(settings),
        list(settings.values()),
    )


async def broken_links(conn: Any, crawl_id: int, rows: list[Any] | None = None) -> list[BrokenLink]:
    """Broken links with their source pages, sorted by URL; sources sorted too."""
    found: dict[str, BrokenLink] = {}
    sources: defaultdict[str, dict[str, int | None]] = defaultdict(dict)
    if rows is None:
        rows = await _edge_rows(conn, crawl_id)
    for url, status, error, source, _, packed, _ in rows:
        if url not in found:
            found[url] = BrokenLink(url=url, status=status, error=error)
        if source is not None:
            known = sources[url]
            known[source] = first_position(known.get(source), packed)
    for url, link in found.items():
        link.sources = sorted(sources[url])
        link.locations = [
            Location(source, *unpack_position(sources[url][source])) for source in link.sources
        ]
    return [found[url] for url in sorted(found)]


async def _position(conn: Any) -> str:
    """SQL for a link's packed position; NULL on a database before migration 0015."""
    has = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = "
        "'broken_links' AND column_name = 'line' AND table_schema = current_schema())"
    )
    return _AT if has else "NULL::bigint"


async def broken_edges(conn: Any, crawl_id: int, rows: list[Any] | None = None) -> list[BrokenEdge]:
    """One row per (broken URL, source page), sorted by URL then source (seeds first)."""
    groups: dict[tuple[str, str | None], list[Any]] = {}
    elements: defaultdict[tuple[str, str | None], set[str]] = defaultdict(set)
    if rows is None:
        rows = await _edge_rows(conn, crawl_id)
    for url, status, error, source, element, packed, kind in rows:
        key = (url, source)
        if key not in groups:
            groups[key] = [status, error, kind, packed]
        else:
            if groups[key][2] is None:
                groups[key][2] = kind
            groups[key][3] = first_position(groups[key][3], packed)
        if element:
            elements[key].add(element)
    ordered = sorted(groups, key=lambda k: (k[0], k[1] is not None, k[1] or ""))
    return [
        BrokenEdge(
            url=url,
            status=groups[(url, source)][0],
            error=groups[(url, source)][1],
            kind=groups[(url, source)][2] or "unknown",
            source=source,
            elements=tuple(sorted(elements[(url, source)])),
            line=unpack_position(groups[(url, source)][3])[0],
            column=unpack_position(groups[(url, source)][3])[1],
        )
        for url, source in ordered
    ]


async def pages(conn: Any, crawl_id: int) -> list[str]:
    """The pages crawled (the ones ``summary`` counts), sorted by URL."""
    return sorted(url for (url,) in await conn.fetch(_PAGES, crawl_id))


async def results(conn: Any, crawl_id: int) -> list[ResultRow]:
    """Every checked URL in the order it was checked."""
    located = await _located(conn)
    rows = await conn.fetch(_RESULTS.format(located=located), crawl_id)
    fresh: dict[int, list[list[Any]]] = {}
    if located != "NULL::text":
        ids = [int(r[0]) for r in rows if r[2] in LOCATED_CLASSES]
        fresh = await _fresh_locations(conn, ids)
    return [
        ResultRow(
            url_id=int(r[0]),
            url=r[1],
            result_class=r[2],
            status=r[3],
            error=r[4],
            content_type=r[5],
            elapsed_ms=r[6],
            checked_at=float(r[7]),
            locations=_locations(r[8], fresh.get(int(r[0]))),
        )
        for r in rows
    ]


async def _located(conn: Any) -> str:
    """SQL for a result's located sources in ``link_open`` (NULL before migration 0015)."""
    if await _position(conn) != _AT:
        return "NULL::text"
    classes = ", ".join(f"'{name}'" for name in LOCATED_CLASSES)
    return (
        f"CASE WHEN rv.class IN ({classes}) THEN ("
        "SELECT json_agg(json_build_array(s.url, l.line, l.col))::text "
        "FROM link_open l JOIN url s ON s.id = l.source_id "
        "WHERE l.target_id = r.url_id AND l.element <> 'redirect') END"
    )


def _locations(merged: str | None, fresh: list[list[Any]] | None) -> list[Location] | None:
    """A result's sources from both tables, as if every link were merged already."""
    if merged is None and not fresh:
        return None
    return locations_of((json.loads(merged) if merged is not None else []) + (fresh or []))


async def _fresh_locations(conn: Any, ids: list[int]) -> dict[int, list[list[Any]]]:
    """[source, line, column] of the links to ``ids`` not merged yet (migration 0017).

    ``link_fresh`` has no index by target: it is read once, hashed against
    the URLs asked about, not once per URL.
    """
    if not ids or await conn.fetchval("SELECT to_regclass('link_fresh') IS NULL"):
        return {}
    found: defaultdict[int, list[list[Any]]] = defaultdict(list)
    for target, source, line, column in await conn.fetch(
        "SELECT l.target_id, s.url, l.line, l.col "
        "FROM link_fresh l JOIN unnest($1::bigint[]) AS t (id) ON t.id = l.target_id "
        "JOIN url s ON s.id = l.source_id WHERE l.element <> 'redirect'",
        ids,
    ):
        found[int(target)].append([source, line, column])
    return found
