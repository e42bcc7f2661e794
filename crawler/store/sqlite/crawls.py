"""Crawl rows: creating a crawl, finding the one to resume or report on.

A database holds any number of crawls; ``crawl`` adds one and never deletes
another, so a second run keeps the first one's results for comparison.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from crawler.errors import UsageError
from crawler.models import CrawlRecord
from crawler.store.sqlite.db import atomic


def create(conn: sqlite3.Connection, seeds: list[str], config: dict[str, Any], now: float) -> int:
    """Start a new crawl; return its id."""
    with atomic(conn):
        cur = conn.execute(
            "INSERT INTO crawl (seeds, config, started_at) VALUES (?, ?, ?)",
            (json.dumps(seeds), json.dumps(config, sort_keys=True), now),
        )
    assert cur.lastrowid is not None
    return cur.lastrowid


def get(conn: sqlite3.Connection, crawl_id: int | None = None) -> CrawlRecord:
    """The crawl with this id, or the latest one; UsageError when there is none."""
    if crawl_id is None:
        row = conn.execute(
            "SELECT id, seeds, config, state, started_at, finished_at, elapsed_s "
            "FROM crawl ORDER BY id DESC LIMIT 1"
        ).fetchone()
        if row is None:
            raise UsageError("the database holds no crawl yet; start one with `crawler crawl URL`")
    else:
        row = conn.execute(
            "SELECT id, seeds, config, state, started_at, finished_at, elapsed_s "
            "FROM crawl WHERE id = ?",
            (crawl_id,),
        ).fetchone()
        if row is None:
            raise UsageError(f"no crawl with id {crawl_id} in this database")
    return CrawlRecord(
        id=row[0],
        seeds=json.loads(row[1]),
        config=json.loads(row[2]),
        state=row[3],
        started_at=row[4],
        finished_at=row[5],
        elapsed_s=row[6],
    )


def latest_unfinished(conn: sqlite3.Connection) -> CrawlRecord | None:
    """The newest crawl that has not finished, if any."""
    row = conn.execute("SELECT max(id) FROM crawl WHERE state = 'running'").fetchone()
    return None if row[0] is None else get(conn, row[0])


def add_elapsed(conn: sqlite3.Connection, crawl_id: int, seconds: float) -> None:
    """Add this run's active time, so pages/s stays honest across resumes."""
    with atomic(conn):
        conn.execute("UPDATE crawl SET elapsed_s = elapsed_s + ? WHERE id = ?", (seconds, crawl_id))
