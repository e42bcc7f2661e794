"""Completing fetched rows on PostgreSQL: the group commit, in a few array statements.

``complete`` is ``FrontierStore.complete``'s transaction body: it marks the
batch's rows done (or pending again for a retry) only where this owner still
holds the lease, then records, for the accepted rows only, their redirect
targets and children (``discover.Recorder``), the links (open ones appended
to ``link_fresh``: ``links``), the anchors and the results. Only the first
completion of a row in a batch can be accepted, as on SQLite, where the one
after it finds the lease already given up.

``enqueue`` is ``FrontierStore.enqueue``'s body, also run inside the
transaction that records a new crawl (``crawls.create``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crawler.models import Discovered, Outcome
from crawler.store.postgres import arrays, links, recrawl
from crawler.store.postgres.discover import (
    RESULT_TEXT_COLUMNS,
    UPSERT_RESULTS,
    Found,
    Recorder,
    ResultRow,
)

# The rows are found by id (``url_pkey``), the lease checked on each: ``(...) IS
# TRUE`` keeps ``url_leased`` out of the plan. Given ``url.lease_owner = $n``,
# the planner estimated one leased row (the statistics' share of leased rows),
# scanned this worker's leased rows through that index and joined the batch in
# a nested loop, unnesting the arrays once per leased row: time grew with the
# leased rows times the batch (bench/RESULTS-postgres.md, session 25).
_RETRY = """
UPDATE url SET state = 0, lease_owner = NULL, lease_expires_at = NULL,
    attempts = attempts + 1, next_attempt_at = x.at
FROM unnest($1::text::bigint[], $2::text::double precision[]) AS x (id, at)
WHERE url.id = x.id AND url.state = 1 AND (url.lease_owner = $3) IS TRUE
RETURNING url.id
"""

# A row upgraded from check to page while we held it goes back to pending. A
# page crawled OK is settled: links to it go to link_settled from now on.
_DONE = """
UPDATE url SET state = CASE WHEN url.kind = x.kind THEN 2 ELSE 0 END,
    settled = (url.kind = x.kind AND x.settles),
    lease_owner = NULL, lease_expires_at = NULL, attempts = attempts + 1
FROM unnest($1::text::bigint[], $2::text::smallint[], $3::text::boolean[]) AS x (id, kind, settles)
WHERE url.id = x.id AND url.state = 1 AND (url.lease_owner = $4) IS TRUE
RETURNING url.id, url.settled
"""


# One row per source page (migration 0016); a page completed again (rare: a
# kind upgrade) appends its links to its row.
_SETTLED_LINKS = """
INSERT INTO link_settled_page (source_id, target_ids, elements, lines, cols)
SELECT x.source_id, array_agg(x.target_id ORDER BY x.target_id),
       array_agg(x.element ORDER BY x.target_id),
       array_agg(x.line ORDER BY x.target_id),
       array_agg(x.col ORDER BY x.target_id)
FROM unnest($1::text::bigint[], $2::text::bigint[], $3::text::text[], $4::text::integer[],
            $5::text::integer[])
    AS x (source_id, target_id, element, line, col)
GROUP BY x.source_id
ORDER BY x.source_id
ON CONFLICT (source_id) DO UPDATE SET
    target_ids = link_settled_page.target_ids || excluded.target_ids,
    elements = link_settled_page.elements || excluded.elements,
    lines = link_settled_page.lines || excluded.lines,
    cols = link_settled_page.cols || excluded.cols
"""


async def complete(
    conn: Any,
    recorder: Recorder,
    owner: str,
    outcomes: Sequence[Outcome],
    now: float,
    merger: links.LinkMerger | None = None,
) -> list[bool]:
    """Commit a batch of fetched rows; False marks a rejected (stale) completion."""
    # Only the first completion of a row in a batch can be accepted: the
    # one after it finds the lease already given up, as on SQLite.
    first: dict[int, int] = {}
    for i, outcome in enumerate(outcomes):
        first.setdefault(outcome.leased.id, i)
    retries = sorted(
        (o.leased.id, o.retry_at or now)
        for i, o in enumerate(outcomes)
        if o.result is None and first[o.leased.id] == i
    )
    dones = sorted(
        (o.leased.id, int(o.leased.kind), o.settles)
        for i, o in enumerate(outcomes)
        if o.result is not None and first[o.leased.id] == i
    )
    accepted: set[int] = set()
    if retries:
        rows = await conn.fetch(
            _RETRY,
            arrays.numbers([r[0] for r in retries]),
            arrays.numbers([r[1] for r in retries]),
            owner,
        )
        accepted.update(int(r[0]) for r in rows)
    settled: set[int] = set()
    if dones:
        columns = [arrays.numbers([d[i] for d in dones]) for i in range(3)]
        rows = await conn.fetch(_DONE, *columns, owner)
        accepted.update(int(r[0]) for r in rows)
        settled.update(int(r[0]) for r in rows if r[1])
    flags = [o.leased.id in accepted and first[o.leased.id] == i for i, o in enumerate(outcomes)]
    done = [o for o, ok in zip(outcomes, flags, strict=True) if ok and o.result is not None]
    for o in done:
        if o.leased.id in settled:
            recorder.settle(o.leased.url)
    if done:
        await _record_done(conn, recorder, done, now, merger)
    return flags


async def _record_done(
    conn: Any,
    recorder: Recorder,
    done: list[Outcome],
    now: float,
    merger: links.LinkMerger | None,
) -> None:
    """Children, redirect targets, links, anchors and results of accepted outcomes."""
    found: list[Found] = []
    for o in done:
        if o.redirect_to is not None:
            found.append(Found(o.redirect_to, o.leased.depth, o.leased.hop + 1))
        found.extend(Found(child, o.leased.depth + 1, 0) for child in o.children)
    results: list[ResultRow] = []
    ids, settled, _ = await recorder.record(conn, found, now, results)
    # Key -> (element, line, column): the first occurrence in the batch is kept.
    edges: dict[tuple[int, int, str], tuple[str, int | None, int | None]] = {}
    settled_edges: dict[tuple[int, int], tuple[str, int | None, int | None]] = {}
    anchors: set[tuple[int, str]] = set()
    issues: list[tuple[int, int, str, str, str | None]] = []
    validators: list[recrawl.Validators] = []
    position = 0
    for o in done:
        source = o.leased.id
        redirect_id = None
        if o.redirect_to is not None:
            redirect_id = ids[position]
            position += 1
            if redirect_id is not None:
                edges.setdefault((redirect_id, source, ""), ("redirect", None, None))
        for child in o.children:
            target, is_settled = ids[position], settled[position]
            position += 1
            if target is None:
                continue
            if is_settled and not child.fragment:
                settled_edges.setdefault(
                    (source, target), (child.element, child.line, child.column)
                )
            else:
                edges.setdefault(
                    (target, source, child.fragment), (child.element, child.line, child.column)
                )
        if o.anchors is not None:
            anchors.add((source, ""))
            anchors.update((source, name) for name in o.anchors)
        issues.extend((source, i, *issue) for i, issue in enumerate(o.render_issues))
        r = o.result
        assert r is not None
        if (r.etag or r.last_modified) and o.settles:
            validators.append((source, r.etag, r.last_modified))
        results.append(
            (
                source,
                str(r.result_class),
                r.status,
                r.error_kind,
                r.error,
                redirect_id,
                r.content_type,
                r.bytes,
                r.elapsed_ms,
                now,
                r.head_status,
            )
        )
    if edges:
        await links.record(conn, edges)
        if merger is not None:
            merger.appended(len(edges))
    if settled_edges:
        pairs = sorted(settled_edges)
        await conn.execute(
            _SETTLED_LINKS,
            arrays.numbers([p[0] for p in pairs]),
            arrays.numbers([p[1] for p in pairs]),
            arrays.texts([settled_edges[p][0] for p in pairs]),
            arrays.numbers([settled_edges[p][1] for p in pairs]),
            arrays.numbers([settled_edges[p][2] for p in pairs]),
        )
    if anchors:
        names = sorted(anchors)
        await conn.execute(
            "INSERT INTO anchor (url_id, name) "
            "SELECT * FROM unnest($1::bigint[], $2::text[]) ON CONFLICT DO NOTHING",
            [a[0] for a in names],
            [a[1] for a in names],
        )
    if issues:
        await write_render_issues(conn, issues)
    await write_results(conn, results)
    await recrawl.save_validators(conn, validators)


async def write_render_issues(
    conn: Any, issues: list[tuple[int, int, str, str, str | None]]
) -> None:
    """A rendered page's issues; a page rendered again keeps only its latest."""
    issues.sort(key=lambda i: (i[0], i[1]))
    await conn.execute(
        "DELETE FROM render_issue WHERE url_id = ANY($1::bigint[])", sorted({i[0] for i in issues})
    )
    columns = list(zip(*issues, strict=True))
    await conn.execute(
        "INSERT INTO render_issue (url_id, seq, kind, message, target) "
        "SELECT * FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::text[], $5::text[]) "
        "ON CONFLICT DO NOTHING",
        *(list(c) for c in columns),
    )


async def write_results(conn: Any, results: list[ResultRow]) -> None:
    if not results:
        return
    results.sort(key=lambda r: r[0])
    columns = list(zip(*results, strict=True))
    await conn.execute(
        UPSERT_RESULTS,
        *(
            arrays.texts(c) if i in RESULT_TEXT_COLUMNS else arrays.numbers(c)
            for i, c in enumerate(columns)
        ),
    )


async def enqueue(conn: Any, recorder: Recorder, seeds: Sequence[Discovered], now: float) -> int:
    """Add seeds at depth 0 in the caller's transaction; return how many were new."""
    results: list[ResultRow] = []
    _, _, new = await recorder.record(conn, [Found(seed, 0, 0) for seed in seeds], now, results)
    await write_results(conn, results)
    return new
