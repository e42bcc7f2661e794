"""Deleting one crawl from a SQLite file that other crawls share, in bounded batches.

The service keeps the runs of one crawl definition in one file
(``DATA/definitions/<id>.db``), and retention deletes the oldest run while
the newest may be running in the same file. SQLite has one writer at a time,
so the delete is cut into short transactions of ``DELETE_BATCH`` URLs each
(with their results, links, anchors and validators); between two, the
running crawl's writer takes its turn, waiting at most one batch.

Every link's source is a URL of the same crawl, so deleting the links *from*
a batch's URLs removes all of the crawl's links once every batch is done;
results of later batches that redirect into this batch are cut first
(``result.redirect_to_id`` is a foreign key).

The pages freed go to the file's freelist, and the next run's rows reuse
them: the file stops growing once it holds ``keep_runs`` + 1 runs. It does not
shrink by itself (``VACUUM`` rewrites it, with the service stopped).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawler.store.sqlite import db
from crawler.store.sqlite.db import atomic

DELETE_BATCH = 2000  # URLs per transaction

_BATCH = "SELECT id FROM url WHERE crawl_id = ? AND id > ? ORDER BY id LIMIT ?"
_IN_BATCH = "(SELECT id FROM url WHERE crawl_id = ? AND id BETWEEN ? AND ?)"
_BATCH_STATEMENTS = (
    f"UPDATE result SET redirect_to_id = NULL WHERE redirect_to_id IN {_IN_BATCH}",
    f"DELETE FROM link_open WHERE source_id IN {_IN_BATCH}",
    f"DELETE FROM link_fresh WHERE source_id IN {_IN_BATCH}",  # not merged yet
    f"DELETE FROM link_settled WHERE source_id IN {_IN_BATCH}",
    f"DELETE FROM anchor WHERE url_id IN {_IN_BATCH}",
    f"DELETE FROM page_validator WHERE url_id IN {_IN_BATCH}",
    f"DELETE FROM render_issue WHERE url_id IN {_IN_BATCH}",
    f"DELETE FROM result WHERE url_id IN {_IN_BATCH}",
    "DELETE FROM url WHERE crawl_id = ? AND id BETWEEN ? AND ?",
)
# Runs of open links (migration 0020) whose rows all went with deleted crawls.
_EMPTY_RUNS = (
    "DELETE FROM link_run WHERE NOT EXISTS (SELECT 1 FROM link_open l WHERE l.run = link_run.id)"
)
_CRAWL_STATEMENTS = (
    "DELETE FROM worker WHERE crawl_id = ?",
    "DELETE FROM robots WHERE crawl_id = ?",
    "DELETE FROM cookie WHERE crawl_id = ?",
    "DELETE FROM crawl_count WHERE crawl_id = ?",
    "DELETE FROM crawl WHERE id = ?",
)


def delete_crawl(path: Path, crawl_id: int, batch: int | None = None) -> int:
    """Remove crawl ``crawl_id`` and all its rows from ``path``; the batches it took."""
    if not path.exists():
        return 0
    conn = db.open_database(path)
    try:
        return delete_rows(conn, crawl_id, batch)
    finally:
        conn.close()


def delete_rows(conn: sqlite3.Connection, crawl_id: int, batch: int | None = None) -> int:
    """``delete_crawl`` on an open writer connection (``batch``: ``DELETE_BATCH``)."""
    batch = batch or DELETE_BATCH
    batches = 0
    while True:
        ids = [row[0] for row in conn.execute(_BATCH, (crawl_id, 0, batch))]
        if not ids:
            break
        bounds = (crawl_id, ids[0], ids[-1])
        with atomic(conn):
            for statement in _BATCH_STATEMENTS:
                conn.execute(statement, bounds)
        batches += 1
    with atomic(conn):
        for statement in _CRAWL_STATEMENTS:
            conn.execute(statement, (crawl_id,))
        conn.execute(_EMPTY_RUNS)
    return batches
