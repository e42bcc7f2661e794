"""Open links: appended to ``link_fresh`` at each completion, moved into ``link_open`` in runs.

``link_open`` answers "who links to this broken URL?", so it is sorted by
target. Inserting each page's links into one target-keyed tree as the page
completed put ~20 random B-tree pages per page into every commit's WAL and
every checkpoint (migration 0016); merging batches into that one tree later
rewrote most of it at each batch, more as it grew (migration 0020). So a
completion appends its links to ``link_fresh`` (``record``), and
``merge_due`` moves ``link_fresh`` into ``link_open`` once it holds
``batch_rows`` rows, as a new run: keyed by (run, target, ...), the batch is
appended at the end of the tree, sorted by target inside the run, and each
page is written once. Readers search ``link_open`` run by run (``link_run``).

A run is written in one transaction with the delete of its rows from
``link_fresh``: a reader sees each link in one table, and a merge cut short
leaves nothing behind. Rows appended meanwhile (another process on the same
file) are left for the next batch.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping

from crawler.store.sqlite import bulk
from crawler.store.sqlite.db import atomic

MIN_BATCH_ROWS = 200_000
# One transaction holds a run (its pages in the WAL until it commits): past this
# many rows a batch is moved as several runs.
MAX_RUN_ROWS = 4_000_000

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
    return merge(conn)


def merge(conn: sqlite3.Connection) -> int:
    """Move every row of ``link_fresh`` into ``link_open``, as one run per transaction."""
    moved = 0
    while True:
        with atomic(conn):
            (first,) = conn.execute("SELECT min(rowid) FROM link_fresh").fetchone()
            if first is None:
                return moved
            (last,) = conn.execute("SELECT max(rowid) FROM link_fresh").fetchone()
            cut = min(int(last), int(first) + MAX_RUN_ROWS - 1)
            run = conn.execute(
                "INSERT INTO link_run (rows, merged_at) VALUES (0, ?)", (time.time(),)
            ).lastrowid
            # The first of duplicate keys wins (a page completed again appends its links again).
            kept = conn.execute(
                "INSERT OR IGNORE INTO link_open "
                "(run, target_id, source_id, fragment, element, at) "
                "SELECT ?, target_id, source_id, fragment, element, at FROM link_fresh "
                "WHERE rowid <= ? ORDER BY target_id, source_id, fragment, rowid",
                (run, cut),
            ).rowcount
            conn.execute("UPDATE link_run SET rows = ? WHERE id = ?", (kept, run))
            moved += conn.execute("DELETE FROM link_fresh WHERE rowid <= ?", (cut,)).rowcount
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
