"""Open links: appended to ``link_fresh`` at each completion, moved into ``link_open`` in batches.

``link_open`` is keyed by target, because reports ask "who links to this
broken URL?". Inserting each page's links into it as the page completes put
~20 random B-tree pages per page into every commit's WAL and every
checkpoint (migration 0016 has the figures). So a completion appends them to
``link_fresh`` (``record``), and ``merge_due`` moves ``link_fresh`` into
``link_open`` sorted by target once it holds ``batch_rows`` rows: each
``link_open`` page is rewritten about once per batch instead of once per link.
The batch grows with the crawl (as many rows as it has URLs), so the bytes
written per link stay about the same however large ``link_open`` gets.

A merge sorts the batch once (into a temporary table), copies it into
``link_open`` one range of targets per transaction, so the WAL holds one
range's pages at a time, then deletes the batch from ``link_fresh`` in one
transaction. Until then a range already copied is in both tables: a reader
may see such a link twice (never not at all), as after a crash mid-merge,
until the next merge (``INSERT OR IGNORE``) deletes the copy. Rows appended
meanwhile (another process on the same file) are left for the next batch.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from crawler.store.sqlite import bulk
from crawler.store.sqlite.db import atomic

MIN_BATCH_ROWS = 200_000
# The merge's ranges: about this many link_fresh rows each (a range rewrites
# the link_open pages its targets fall on, so this also bounds the WAL).
RANGE_ROWS = 50_000

# (target, source, fragment) -> (element, position packed: crawler.store.sqlite.positions)
Edges = Mapping[tuple[int, int, str], tuple[str, int | None]]


def record(conn: sqlite3.Connection, edges: Edges) -> None:
    """Append open links (inside the caller's transaction), one row per key."""
    bulk.insert(
        conn,
        "INSERT INTO link_fresh (target_id, source_id, fragment, element, at)",
        [(t, s, f, e, at) for (t, s, f), (e, at) in edges.items()],
    )


# Two subqueries, not ``max(rowid) - min(rowid)`` in one: SQLite answers a lone
# min() or max() with one B-tree seek, but both in one query with a full scan,
# which a completion then paid on every commit (millions of rows at 1,000,000 pages).
FRESH_ROWS_SQL = (
    "SELECT (SELECT max(rowid) FROM link_fresh) - (SELECT min(rowid) FROM link_fresh) + 1"
)


def fresh_rows(conn: sqlite3.Connection) -> int:
    """About how many rows ``link_fresh`` holds (from its rowids: two index seeks)."""
    row = conn.execute(FRESH_ROWS_SQL).fetchone()
    return int(row[0] or 0)


def batch_rows(conn: sqlite3.Connection) -> int:
    """Merge once ``link_fresh`` holds this many rows: the crawl's URLs, at least the minimum."""
    (urls,) = conn.execute("SELECT max(id) FROM url").fetchone()
    return max(MIN_BATCH_ROWS, int(urls or 0))


def merge_due(conn: sqlite3.Connection, *, force: bool = False) -> int:
    """Move ``link_fresh`` into ``link_open`` if it is full (or ``force``); rows moved."""
    held = fresh_rows(conn)
    if held <= 0 or (not force and held < batch_rows(conn)):
        return 0
    return merge(conn, ranges=max(1, held // RANGE_ROWS))


def merge(conn: sqlite3.Connection, *, ranges: int = 1) -> int:
    """Move every row of ``link_fresh`` into ``link_open`` in ``ranges`` transactions."""
    (cut,) = conn.execute("SELECT max(rowid) FROM link_fresh").fetchone()
    if cut is None:
        return 0
    conn.execute("DROP TABLE IF EXISTS temp.link_batch")
    conn.execute(
        "CREATE TEMP TABLE link_batch AS "
        "SELECT target_id, source_id, fragment, element, at FROM link_fresh WHERE rowid <= ? "
        "ORDER BY target_id, source_id, fragment, rowid",
        (cut,),
    )
    try:
        (rows,) = conn.execute("SELECT max(rowid) FROM temp.link_batch").fetchone()
        step = max(1, -(-(rows or 0) // ranges))
        for start in range(1, (rows or 0) + 1, step):
            with atomic(conn):
                conn.execute(
                    "INSERT OR IGNORE INTO link_open "
                    "(target_id, source_id, fragment, element, at) "
                    "SELECT target_id, source_id, fragment, element, at FROM temp.link_batch "
                    "WHERE rowid >= ? AND rowid < ? ORDER BY rowid",
                    (start, start + step),
                )
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        with atomic(conn):
            moved = conn.execute("DELETE FROM link_fresh WHERE rowid <= ?", (cut,)).rowcount
    finally:
        conn.execute("DROP TABLE IF EXISTS temp.link_batch")
    return int(moved)
