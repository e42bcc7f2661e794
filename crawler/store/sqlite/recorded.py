"""A 304 page's links, copied from the previous crawl's rows by SQL, never through Python.

A re-crawl's page answered ``304 Not Modified`` has the links its previous
crawl recorded (``Recorded``). Reading ~50 rows a page into Python, classifying
each, looking each up in the writer's cache and writing each again was most
of a re-crawl's work; here a batch of such pages costs a few statements:

1. ``temp.recorded_batch``: the batch's pages (new row, old row, depth);
   ``temp.recorded_link``: their old links (both link tables, by source),
   each marked ``fresh`` unless an earlier batch mapped its target to a row
   whose kind the link cannot raise (most links: to pages every page links to).
2. ``temp.recorded_url``: one row per target of fresh links, from those links
   alone: the least depth, whether one of them would crawl it (a page element
   within ``--max-depth``), whether one names an anchor to check. Steps 3 and
   4 read only these rows: a batch pays for its new targets, not its links.
3. Each old target met for the first time is classified once, in Python
   (``Scope.recorded_target``), into ``temp.recorded_target``; with that
   answer per URL, the strongest of its links' kinds follows in SQL (the
   rest of ``classify_recorded``: ``scope.recorded_kind``'s twin).
4. A target this writer has not met yet is upserted into ``url`` with
   ``Frontier._upsert``'s meaning (new rows pending, or done with their
   result when skipped; a stronger kind upgrades and re-opens a row) and its
   row remembered in ``recorded_target``; one met before is upgraded by id
   when this batch raises its kind. A new checked URL reuses a fine result
   of an earlier crawl under ``--max-cache-age``.
5. The links, by the new rows: to a page this writer knows settled (its row
   was when mapped, or a 304 page it completed since), without a fragment,
   into ``link_settled``; every other into ``link_fresh``. No link searches
   ``url``: ``recorded_target`` (one slim row a target) stays in the cache.

The batch's tables drive every join into ``recorded_target``, which grows
with the crawl (``CROSS JOIN`` fixes SQLite's join order): a batch costs
what it holds, not what the crawl has met. Ids are given in the previous
crawl's order of the targets. The caller holds the transaction and leaves
the writer's caches as they are (rows it does not know of are looked up).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from crawler import recrawl
from crawler.models import LinkClassifier, Outcome
from crawler.scope import ANCHOR_ELEMENTS, PAGE_ELEMENTS
from crawler.store.sqlite import bulk
from crawler.store.sqlite import recrawl as previous


def _listed(names: frozenset[str]) -> str:
    return ", ".join(f"'{name}'" for name in sorted(names))


_TABLES = """
CREATE TEMP TABLE IF NOT EXISTS recorded_target (
    old_id INTEGER PRIMARY KEY, skipped TEXT, reason TEXT,
    crawlable INTEGER NOT NULL, new_id INTEGER, new_kind INTEGER,
    new_settled INTEGER DEFAULT 0);
CREATE TEMP TABLE IF NOT EXISTS recorded_batch (
    new_id INTEGER PRIMARY KEY, old_id INTEGER NOT NULL, depth INTEGER NOT NULL,
    within INTEGER NOT NULL, settles INTEGER NOT NULL);
CREATE TEMP TABLE IF NOT EXISTS recorded_link (
    source_id INTEGER NOT NULL, old_target INTEGER NOT NULL, element TEXT NOT NULL,
    fragment TEXT NOT NULL, at INTEGER, depth INTEGER NOT NULL, paged INTEGER NOT NULL,
    anchored INTEGER NOT NULL, fresh INTEGER NOT NULL, new_target INTEGER,
    settled INTEGER NOT NULL);
CREATE TEMP TABLE IF NOT EXISTS recorded_url (
    old_id INTEGER PRIMARY KEY, paged INTEGER NOT NULL, anchored INTEGER NOT NULL,
    depth INTEGER NOT NULL, kind INTEGER);
"""

# What a link alone says of its target (``l`` its link row, ``within`` its
# source's depth): it would crawl it (a page element within --max-depth), it
# names an anchor to check.
_PAGED = f"(l.within AND l.element IN ({_listed(PAGE_ELEMENTS)}))"
_ANCHORED = f"""(l.fragment <> '' AND l.element IN ({_listed(ANCHOR_ELEMENTS)})
    AND substr(l.fragment, 1, 3) <> ':~:')"""

# ``fresh``: the link may make or raise its target's row. A link to a target an
# earlier batch mapped (``new_id``) whose kind it cannot raise (skipped, or at
# least what the link could give: a page if paged, anchors if anchored, else a
# check) only needs its row written: most of a re-crawl's links, to pages every
# page links to. Those are told by their target's row alone: ``paged`` and
# ``anchored`` are worked out (a string compared with lists, for every link)
# only where they can matter, for a target not mapped yet or mapped below a
# page; the rest keep 0, which only fresh links are read for (``_TARGETS``).
# The two link tables in two branches: each is searched by source.
_LINKS = f"""
INSERT INTO temp.recorded_link
    (source_id, old_target, element, fragment, at, depth, paged, anchored, fresh,
     new_target, settled)
SELECT l.source_id, l.old_target, l.element, l.fragment, l.at, l.depth,
       CASE WHEN f.new_id IS NULL OR f.new_kind BETWEEN 1 AND 2 THEN {_PAGED} ELSE 0 END,
       CASE WHEN f.new_id IS NULL OR f.new_kind = 1 THEN {_ANCHORED} ELSE 0 END,
       CASE WHEN f.new_id IS NULL THEN 1
            WHEN f.new_kind BETWEEN 1 AND 2
                THEN f.new_kind < CASE WHEN {_PAGED} THEN 3 WHEN {_ANCHORED} THEN 2 ELSE 1 END
            ELSE 0 END,
       f.new_id, coalesce(f.new_settled, 0)
FROM (SELECT b.new_id AS source_id, l.target_id AS old_target, l.element, l.fragment, l.at,
             b.depth, b.within
      FROM temp.recorded_batch b JOIN link_open l ON l.source_id = b.old_id
      WHERE l.element <> 'redirect'
      UNION ALL
      SELECT b.new_id, l.target_id, l.element, l.fragment, l.at, b.depth, b.within
      FROM temp.recorded_batch b JOIN link_settled l ON l.source_id = b.old_id) l
LEFT JOIN temp.recorded_target f ON f.old_id = l.old_target
"""

# One row per target its fresh links may make or raise, from those links alone:
# whether one of them would crawl it (a page element within --max-depth),
# whether one names an anchor to check, and their least depth (an upgrade's).
_TARGETS = """
INSERT INTO temp.recorded_url (old_id, paged, anchored, depth)
SELECT old_target, max(paged), max(anchored), min(depth)
FROM temp.recorded_link WHERE fresh GROUP BY old_target
"""

_UNCLASSIFIED = """
SELECT t.id, t.url
FROM temp.recorded_url r JOIN url t ON t.id = r.old_id
WHERE NOT EXISTS (SELECT 1 FROM temp.recorded_target f WHERE f.old_id = r.old_id)
"""

# scope.recorded_kind of the strongest link: the per-URL answer, then the links'
# (the strongest link's kind is a page if any link crawls it, else anchors if
# any names one, else a check). ?1 is whether fragments are checked.
_KINDS = """
UPDATE temp.recorded_url SET kind = (
    SELECT CASE WHEN f.skipped IS NOT NULL THEN 0
                WHEN f.crawlable AND temp.recorded_url.paged THEN 3
                WHEN ?1 AND temp.recorded_url.anchored THEN 2
                ELSE 1 END
    FROM temp.recorded_target f WHERE f.old_id = temp.recorded_url.old_id)
"""

# Targets this writer has not met in this crawl yet: Frontier._INSERT and _UPGRADE in
# one (a stronger kind upgrades, and re-opens, a row another writer made).
_UPSERT = """
INSERT INTO url (crawl_id, url, host_id, kind, depth, hop, state)
SELECT ?1, t.url, t.host_id, r.kind, r.depth, 0, CASE WHEN r.kind = 0 THEN 2 ELSE 0 END
FROM temp.recorded_url r CROSS JOIN temp.recorded_target f ON f.old_id = r.old_id
CROSS JOIN url t ON t.id = r.old_id
WHERE f.new_id IS NULL ORDER BY r.old_id
ON CONFLICT (crawl_id, url) DO UPDATE SET
    kind = excluded.kind, depth = min(url.depth, excluded.depth),
    state = CASE WHEN url.state = 2 THEN 0 ELSE url.state END
WHERE url.kind >= 1 AND url.kind < excluded.kind
"""

# ... whose rows are then remembered: later batches find them by id, not by URL.
_MAP = """
UPDATE temp.recorded_target SET (new_id, new_kind, new_settled) = (
    SELECT u.id, u.kind, u.settled FROM url t CROSS JOIN url u ON u.crawl_id = ?1 AND u.url = t.url
    WHERE t.id = temp.recorded_target.old_id)
WHERE old_id IN (SELECT old_id FROM temp.recorded_url) AND new_id IS NULL
"""

# Targets met before whose kind this batch raises (Frontier._UPGRADE, by id).
_UPGRADES = """
SELECT f.new_id, r.kind, r.depth, f.old_id
FROM temp.recorded_url r CROSS JOIN temp.recorded_target f ON f.old_id = r.old_id
WHERE f.new_id IS NOT NULL AND f.new_kind >= 1 AND f.new_kind < r.kind
"""
_UPGRADE = """
UPDATE url SET kind = ?2, depth = min(depth, ?3),
    state = CASE WHEN state = 2 THEN 0 ELSE state END
WHERE id = ?1 AND kind >= 1 AND kind < ?2
"""

_SKIPPED = """
INSERT INTO result (url_id, class, error, checked_at)
SELECT f.new_id, f.skipped, f.reason, ?2
FROM temp.recorded_url r CROSS JOIN temp.recorded_target f ON f.old_id = r.old_id
WHERE f.new_id > ?1 AND r.kind = 0
"""

# Frontier._reuse_earlier_result for the batch's new checked URLs.
_REUSE = """
INSERT INTO result (url_id, class, status, content_type, bytes, elapsed_ms, checked_at)
SELECT f.new_id, 'ok', e.status, e.content_type, e.bytes, e.elapsed_ms, e.checked_at
FROM temp.recorded_url r
CROSS JOIN temp.recorded_target f ON f.old_id = r.old_id
CROSS JOIN url t ON t.id = r.old_id
JOIN result e ON e.url_id = (
    SELECT p.id FROM url p JOIN result pr ON pr.url_id = p.id
    WHERE p.crawl_id IN ({marks}) AND p.url = t.url AND pr.class = 'ok' AND pr.checked_at >= ?2
    ORDER BY pr.checked_at DESC LIMIT 1)
WHERE f.new_id > ?1 AND r.kind = 1
"""
# ... which are then done: the batch's new checks (rows after ?1) that have a result.
_REUSED_DONE = """
UPDATE url SET state = 2
WHERE id IN (SELECT url_id FROM result WHERE url_id > ?1) AND kind = 1 AND state = 0
"""

# Which targets are settled (a page crawled OK: links to it go to link_settled)
# is what this writer knows, as for the links it records itself (the writer's
# cache): ``url.settled`` when the target was mapped, and the 304 pages it
# completes since. Searching ``url`` for it at every link cost a random page
# of a table larger than the cache. A link to a page settled out of sight (by
# another writer, or fetched again) goes to link_fresh: the reports read both.
_SETTLED_PAGES = """
UPDATE temp.recorded_target SET new_settled = 1
WHERE old_id IN (SELECT old_id FROM temp.recorded_batch WHERE settles)
"""

# A link's new row and whether its target is settled were read with it
# (``_LINKS``) when its target was mapped then: most links. For the rest the
# row is looked up now that every target is mapped, and a link to one of the
# batch's own settling pages is settled: two inserts that read the batch's
# links alone, not a search of ``recorded_target`` (every target of the
# crawl) a link. The batch's settling pages, a set SQLite builds once a statement.
_NEW_TARGET = """CASE WHEN l.new_target IS NOT NULL THEN l.new_target
     ELSE (SELECT f.new_id FROM temp.recorded_target f WHERE f.old_id = l.old_target) END"""
_SETTLED = """CASE WHEN l.settled THEN 1
     WHEN l.new_target IS NULL
         THEN (SELECT f.new_settled FROM temp.recorded_target f WHERE f.old_id = l.old_target)
     ELSE l.old_target IN (SELECT old_id FROM temp.recorded_batch WHERE settles) END"""

_SETTLED_LINKS = f"""
INSERT OR IGNORE INTO link_settled (source_id, target_id, element, at)
SELECT l.source_id, {_NEW_TARGET}, l.element, l.at FROM temp.recorded_link l
WHERE l.fragment = '' AND {_SETTLED}
"""

_OPEN_LINKS = f"""
INSERT INTO link_fresh (target_id, source_id, fragment, element, at)
SELECT {_NEW_TARGET}, l.source_id, l.fragment, l.element, l.at FROM temp.recorded_link l
WHERE l.fragment <> '' OR NOT {_SETTLED}
ORDER BY l.rowid
"""


def expanded(conn: sqlite3.Connection, outcomes: Sequence[Outcome]) -> list[Outcome]:
    """The outcomes with their recorded links read and classified in Python (``recrawl.expand``).

    For what the SQL copy does not keep: the ``--max-urls`` bound, counted URL by URL.
    """
    pages = [o.recorded.page for o in outcomes if o.recorded is not None]
    return recrawl.expand_all(outcomes, previous.previous_links(conn, pages))


class RecordedLinks:
    """Copies batches of 304 pages' links for one crawl's writer (see the module docstring)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        crawl_id: int,
        *,
        max_cache_age_s: float | None,
        earlier_crawls: Callable[[], list[int]],
    ) -> None:
        self._conn = conn
        self._crawl_id = crawl_id
        self._max_cache_age_s = max_cache_age_s
        self._earlier_crawls = earlier_crawls
        self._made = False

    def forget(self) -> None:
        """After a rollback: the temporary tables made in it are gone too."""
        self._made = False

    def copy(self, outcomes: Sequence[Outcome], now: float) -> None:
        """Take in the recorded links of these accepted outcomes (in the caller's transaction)."""
        conn = self._conn
        if not self._made:
            # A fresh classification per writer: another crawl's scope may differ.
            conn.execute("DROP TABLE IF EXISTS temp.recorded_target")
            for statement in _TABLES.split(";"):
                if statement.strip():
                    conn.execute(statement)
            self._made = True
        batch = []
        scope: LinkClassifier | None = None
        for outcome in outcomes:
            recorded = outcome.recorded
            assert recorded is not None
            scope = recorded.scope
            depth = outcome.leased.depth + 1
            batch.append(
                (
                    outcome.leased.id,
                    recorded.page,
                    depth,
                    scope.within_depth(depth),
                    outcome.settles,
                )
            )
        if scope is None:
            return
        try:
            bulk.insert(
                conn,
                "INSERT INTO temp.recorded_batch (new_id, old_id, depth, within, settles)",
                batch,
            )
            conn.execute(_LINKS)
            conn.execute(_TARGETS)
            self._classify(scope)
            conn.execute(_KINDS, (scope.include_fragments,))
            (before,) = conn.execute("SELECT coalesce(max(id), 0) FROM url").fetchone()
            conn.execute(_UPSERT, (self._crawl_id,))
            conn.execute(_MAP, (self._crawl_id,))
            upgrades = conn.execute(_UPGRADES).fetchall()
            if upgrades:
                conn.executemany(_UPGRADE, [row[:3] for row in upgrades])
                conn.executemany(
                    "UPDATE temp.recorded_target SET new_kind = ? WHERE old_id = ?",
                    [(kind, old_id) for _, kind, _, old_id in upgrades],
                )
            conn.execute(_SKIPPED, (before, now))
            self._reuse(before, now)
            conn.execute(_SETTLED_PAGES)
            conn.execute(_SETTLED_LINKS)
            conn.execute(_OPEN_LINKS)
        finally:
            for table in ("recorded_batch", "recorded_link", "recorded_url"):
                conn.execute(f"DELETE FROM temp.{table}")

    def _classify(self, scope: LinkClassifier) -> None:
        """Classify the batch's targets met for the first time, once each."""
        rows = []
        for old_id, url in bulk.select(self._conn, _UNCLASSIFIED, (), 2):
            target = scope.recorded_target(str(url))
            skipped = None if target.skipped is None else str(target.skipped)
            rows.append((old_id, skipped, target.reason, target.crawlable))
        if rows:
            bulk.insert(
                self._conn,
                "INSERT INTO temp.recorded_target (old_id, skipped, reason, crawlable)",
                rows,
            )

    def _reuse(self, before: int, now: float) -> None:
        """``--max-cache-age``: new checked URLs an earlier crawl found fine are done already."""
        if self._max_cache_age_s is None:
            return
        earlier = self._earlier_crawls()
        if not earlier:
            return
        marks = ",".join(str(int(crawl)) for crawl in earlier)
        self._conn.execute(_REUSE.format(marks=marks), (before, now - self._max_cache_age_s))
        self._conn.execute(_REUSED_DONE, (before,))
