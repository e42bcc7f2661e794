"""Read-side queries: the numbers and lists every report format is rendered from.

Everything here reads; it runs on its own connection so a report never waits
for the crawl and works while the crawl runs. The questions asked, and which
report formats ask them:

- ``summary``: counts per class (every format)
- ``broken_links``: each broken URL with its sources (text, json)
- ``broken_edges``: each (broken URL, source page) pair with why it is broken
  and how the page links to it (markdown, csv, junit, sarif, html)
- ``pages``: the pages crawled (junit's passing test cases)
- ``iter_results``: every checked URL in the order it was checked (jsonl), as a
  generator that can resume after a ``Cursor`` to follow a running crawl

All of them read the same views (``resolved``, ``broken_links``, and
``broken_fragments`` for links to a missing #fragment), so what one format
calls broken every other format calls broken too.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterator

from crawler.models import UrlKind
from crawler.report.model import (
    COUNT_NAMES,
    FRAGMENT_KIND,
    LOCATED_CLASSES,
    POSITION_SHIFT,
    BrokenEdge,
    BrokenLink,
    Cursor,
    HeadOverruled,
    Location,
    RenderIssueRow,
    ResultRow,
    Summary,
    first_position,
    locations_of,
    unpack_position,
)

# What counts as a crawled page (as in ``summary``): fetched for its links, answered OK.
_IS_PAGE = f"u.kind = {int(UrlKind.PAGE)} AND r.class = 'ok'"
# Rows fetched from SQLite at a time by the generators below.
FETCH_ROWS = 500


def summary(conn: sqlite3.Connection, crawl_id: int) -> Summary:
    """Counts per class, read from ``crawl_count`` (kept by triggers) and the redirects.

    No scan of the crawl's URLs: at a million pages that took seconds at the
    end of every crawl.
    """
    if not _has(conn, "table", "crawl_count"):  # a database not migrated yet (read-only)
        counts = _counts_by_scan(conn, crawl_id)
    else:
        counts = dict(
            conn.execute("SELECT name, n FROM crawl_count WHERE crawl_id = ?", (crawl_id,))
        )
        counts["pending"] = conn.execute(
            "SELECT (SELECT count(*) FROM url WHERE crawl_id = ?1 AND state = 0) "
            "+ (SELECT count(*) FROM url WHERE crawl_id = ?1 AND state = 1)",
            (crawl_id,),
        ).fetchone()[0]
    # A redirect whose chain loops, is too long, or ends broken is broken (as in
    # the ``resolved`` view); the chains start from the redirects' partial index.
    (redirect_broken,) = conn.execute(
        "SELECT count(*) FROM redirect_chain rc "
        "CROSS JOIN url u ON u.id = rc.url_id "  # CROSS: chains first, not every URL
        "JOIN crawl c ON c.id = u.crawl_id "
        "JOIN result r ON r.url_id = rc.url_id AND r.class = 'redirected' "
        "LEFT JOIN result fr ON fr.url_id = rc.final_id "
        "WHERE u.crawl_id = ? AND (rc.is_loop "
        "OR rc.hops > COALESCE(json_extract(c.config, '$.max_redirects'), 10) "
        "OR fr.class = 'broken')",
        (crawl_id,),
    ).fetchone()
    fragments = 0
    if _has_fragment_view(conn):
        (fragments,) = conn.execute(
            "SELECT count(DISTINCT url) FROM broken_fragments WHERE crawl_id = ?", (crawl_id,)
        ).fetchone()
    return Summary.from_counts(counts, redirect_broken=redirect_broken, fragments_broken=fragments)


def _counts_by_scan(conn: sqlite3.Connection, crawl_id: int) -> dict[str, int]:
    row = conn.execute(
        "SELECT SUM(r.class = 'ok'), SUM(r.class = 'redirected'), SUM(r.class = 'broken'), "
        "SUM(r.class = 'skipped'), SUM(r.class = 'excluded'), SUM(r.class = 'blocked'), "
        f"SUM({_IS_PAGE}), SUM(u.state <> 2) "
        "FROM url u LEFT JOIN result r ON r.url_id = u.id WHERE u.crawl_id = ?",
        (crawl_id,),
    ).fetchone()
    return dict(zip(COUNT_NAMES, (v or 0 for v in row), strict=True))


def broken_links(conn: sqlite3.Connection, crawl_id: int) -> list[BrokenLink]:
    """Broken links with their source pages, sorted by URL; sources sorted too.

    Each source comes with where it first writes the link (``locations``).
    """
    found: dict[str, BrokenLink] = {}
    sources: defaultdict[str, dict[str, int | None]] = defaultdict(dict)
    at = _position(conn)
    query = f"SELECT url, status, error, source, {at} FROM broken_links WHERE crawl_id = ?1"
    if _has_fragment_view(conn):
        query += (
            f" UNION ALL SELECT url, status, error, source, {at} "
            "FROM broken_fragments WHERE crawl_id = ?1"
        )
    for url, status, error, source, packed in conn.execute(query, (crawl_id,)):
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


def _position(conn: sqlite3.Connection) -> str:
    """SQL for a link's packed line and column (NULL on a database before migration 0015)."""
    row = conn.execute(
        "SELECT 1 FROM pragma_table_info('broken_links') WHERE name = 'line'"
    ).fetchone()
    return f"(line << {POSITION_SHIFT}) + col" if row is not None else "NULL"


# the kind of the broken URL it ends in (the order of the ``resolved`` view).
# broken_links is materialized first: flattened into this query, the planner
# joined url by crawl_id alone (every URL of the crawl for every row).
_BROKEN_EDGE_ROWS = """
WITH bl AS MATERIALIZED (SELECT * FROM broken_links WHERE crawl_id = ?1)
SELECT bl.url, bl.status, bl.error, bl.source, bl.element, {at} AS at,
       CASE
           WHEN rc.url_id IS NULL THEN r.error_kind
           WHEN rc.is_loop THEN 'redirect_loop'
           WHEN bl.error LIKE 'too many redirects%' THEN 'too_many_redirects'
           ELSE fr.error_kind
       END AS kind
FROM bl
JOIN url u                  ON u.crawl_id = bl.crawl_id AND u.url = bl.url
LEFT JOIN result r          ON r.url_id = u.id
LEFT JOIN redirect_chain rc ON rc.url_id = u.id
LEFT JOIN result fr         ON fr.url_id = rc.final_id
WHERE bl.crawl_id = ?1
"""
_FRAGMENT_EDGE_ROWS = f"""
SELECT url, status, error, source, element, {{at}} AS at, '{FRAGMENT_KIND}' AS kind
FROM broken_fragments WHERE crawl_id = ?1
"""

# {located}: the sources of a broken, blocked or redirected URL with where each
# writes it, as a JSON array of [source, line, column] (link_open holds every
# link a report can show, keyed by target).
_RESULTS = """{fresh}
SELECT r.url_id, u.url, rv.class, rv.status, rv.error, r.content_type, r.elapsed_ms, r.checked_at,
       {located}
FROM result r
JOIN url u       ON u.id = r.url_id
JOIN resolved rv ON rv.url_id = r.url_id
WHERE u.crawl_id = ? AND (r.checked_at, r.url_id) > (?, ?)
ORDER BY r.checked_at, r.url_id
"""


def broken_edges(conn: sqlite3.Connection, crawl_id: int) -> list[BrokenEdge]:
    """One row per (broken URL, source page), sorted by URL then source (seeds first).

    The same rows as ``broken_links``, one per source instead of one per URL,
    plus the failure kind and the elements the page links with.
    """
    rows = _BROKEN_EDGE_ROWS
    if _has_fragment_view(conn):
        rows += " UNION ALL " + _FRAGMENT_EDGE_ROWS
    query = (
        "SELECT url, status, error, source, group_concat(DISTINCT element), min(at), kind "
        f"FROM ({rows.format(at=_position(conn))}) GROUP BY url, source ORDER BY url, source"
    )
    edges = []
    for url, status, error, source, elements, at, kind in conn.execute(query, (crawl_id,)):
        line, column = unpack_position(at)
        edges.append(
            BrokenEdge(
                url=url,
                status=status,
                error=error,
                kind=kind or "unknown",
                source=source,
                elements=tuple(sorted(set(elements.split(",")))) if elements else (),
                line=line,
                column=column,
            )
        )
    return edges


def pages(conn: sqlite3.Connection, crawl_id: int) -> list[str]:
    """The pages crawled (the ones ``summary`` counts), sorted by URL."""
    rows = conn.execute(
        f"SELECT u.url FROM url u JOIN result r ON r.url_id = u.id "
        f"WHERE u.crawl_id = ? AND {_IS_PAGE} ORDER BY u.url",
        (crawl_id,),
    )
    return [url for (url,) in rows]


def iter_results(
    conn: sqlite3.Connection, crawl_id: int, after: Cursor | None = None
) -> Iterator[ResultRow]:
    """Every checked URL of a crawl in the order it was checked, after ``after``.

    Rows are read ``FETCH_ROWS`` at a time; the statement (and its read
    snapshot) stays open until the generator is exhausted or closed.

    To follow a running crawl, call again with the last row's ``cursor``.
    ``checked_at`` is stamped by the one writer just before it commits, so the
    results of one process arrive in cursor order and each is seen once, with
    two exceptions: a URL checked again (a link later found as a page) comes
    again with its new result, which supersedes the first; and a second process
    writing to the same crawl can commit a row behind a cursor already passed.
    A redirect reads as ``redirected`` until the end of its chain is checked.
    """
    start = after if after is not None else Cursor(float("-inf"), 0)
    query = _RESULTS.format(located=_located(conn), fresh=_fresh_links(conn))
    cursor = conn.execute(query, (crawl_id, start.checked_at, start.url_id))
    try:
        while rows := cursor.fetchmany(FETCH_ROWS):
            for row in rows:
                located = None if row[8] is None else locations_of(json.loads(row[8]))
                url_id, url, result_class, status, error, content_type, elapsed_ms, at = row[:8]
                yield ResultRow(
                    url_id, url, result_class, status, error, content_type, elapsed_ms, at, located
                )
    finally:
        cursor.close()


def _located(conn: sqlite3.Connection) -> str:
    """SQL for a result's located sources (NULL on a database before migration 0015)."""
    has = conn.execute("SELECT 1 FROM pragma_table_info('link_open') WHERE name = 'at'")
    if has.fetchone() is None:
        return "NULL"
    classes = ", ".join(f"'{name}'" for name in LOCATED_CLASSES)
    fresh = (  # links appended, not moved into link_open yet (``_fresh_links``)
        "UNION SELECT source_id, fragment, at FROM fresh WHERE target_id = r.url_id"
        if _has(conn, "table", "link_fresh")
        else ""
    )
    merged = (  # searched run by run (migration 0020), else by target alone
        "SELECT l.source_id, l.fragment, l.at FROM link_run lr CROSS JOIN link_open l "
        "WHERE l.run = lr.id AND l.target_id = r.url_id AND l.element <> 'redirect' "
        if _has(conn, "table", "link_run")
        else "SELECT source_id, fragment, at FROM link_open "
        "WHERE target_id = r.url_id AND element <> 'redirect' "
    )
    return (
        f"CASE WHEN rv.class IN ({classes}) THEN ("
        "SELECT json_group_array(json_array(s.url, "
        "CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END, "
        "CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END)) "
        f"FROM ({merged}{fresh}) l JOIN url s ON s.id = l.source_id) END"
    )


def _fresh_links(conn: sqlite3.Connection) -> str:
    """The WITH clause behind ``_located``'s reads of ``link_fresh`` (migration 0016).

    ``link_fresh`` has no index by target: read in the correlated subquery it
    would be scanned once per located result. Materialized, it is read once,
    when the first located result needs it, and SQLite indexes it by target
    (1,000 lookups in 200,000 rows: 0.24 s instead of 9 s).
    """
    if not _has(conn, "table", "link_fresh"):
        return ""
    return (
        "WITH fresh AS MATERIALIZED ("
        "SELECT target_id, source_id, fragment, at FROM link_fresh WHERE element <> 'redirect')"
    )


def head_overruled(conn: sqlite3.Connection, crawl_id: int) -> list[HeadOverruled]:
    """Links whose HEAD answer a confirming GET overruled, sorted by URL."""
    if not _has(conn, "index", "result_head_status"):  # not migrated yet (read-only)
        return []
    # CROSS JOIN: from the few overruled results (a partial index), not every URL of
    # the crawl with a search of result each (the planner's choice: seconds at 1,000,000).
    rows = conn.execute(
        "SELECT u.url, r.head_status, r.status FROM result r CROSS JOIN url u ON u.id = r.url_id "
        "WHERE r.head_status IS NOT NULL AND u.crawl_id = ? ORDER BY u.url",
        (crawl_id,),
    )
    return [HeadOverruled(url, head, status) for url, head, status in rows]


def render_issues(conn: sqlite3.Connection, crawl_id: int) -> list[RenderIssueRow]:
    """What went wrong on rendered pages, by page URL, in the order it happened."""
    if not _has(conn, "table", "render_issue"):  # not migrated yet (read-only)
        return []
    rows = conn.execute(  # CROSS JOIN: from the issues, few, not every URL (as above)
        "SELECT u.url, ri.kind, ri.message, ri.target FROM render_issue ri "
        "CROSS JOIN url u ON u.id = ri.url_id WHERE u.crawl_id = ? ORDER BY u.url, ri.seq",
        (crawl_id,),
    )
    return [RenderIssueRow(*row) for row in rows]


def _has_fragment_view(conn: sqlite3.Connection) -> bool:
    """Whether ``broken_fragments`` (migration 0003) can have rows: it needs anchors.

    Without anchors it is empty, and asking it costs a scan of every link.
    """
    return _has(conn, "view", "broken_fragments") and _has_anchors(conn)


def _has(conn: sqlite3.Connection, kind: str, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)
    ).fetchone()
    return row is not None


def _has_anchors(conn: sqlite3.Connection) -> bool:
    """Whether any crawl recorded anchors (--include-fragments); else no fragment is broken."""
    return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM anchor)").fetchone()[0])
