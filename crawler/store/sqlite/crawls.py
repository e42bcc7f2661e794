"""Crawl rows: creating a crawl (with its seeds), finding the one to resume or report on.

A database holds any number of crawls; ``crawl`` adds one and never deletes
another, so a second run keeps the first one's results for comparison.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from crawler.errors import UsageError
from crawler.models import CrawlRecord, Discovered
from crawler.store.sqlite.db import atomic
from crawler.store.sqlite.frontier import Frontier


def create(
    conn: sqlite3.Connection,
    seeds: list[str],
    config: dict[str, Any],
    now: float,
    *,
    enqueue: Sequence[Discovered] = (),
    seeded: bool = True,
    max_urls: int | None = None,
    max_cache_age_s: float | None = None,
    previous_crawl_id: int | None = None,
    crawl_id: int | None = None,
) -> int:
    """Record a new crawl and enqueue its classified seeds, in one transaction; return its id.

    A crawl is never visible without its seeds: a crash right after this
    leaves work to resume, not an empty frontier that reads as finished.
    ``seeded`` False leaves the crawl waiting for its sitemaps (``mark_seeded``);
    ``previous_crawl_id`` makes it a re-crawl of that crawl; ``crawl_id``
    records it under that id (the service's runs of one definition share a file).
    """
    with atomic(conn):
        cur = conn.execute(
            "INSERT INTO crawl (id, seeds, config, started_at, seeded_at, previous_crawl_id) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                crawl_id,
                json.dumps(seeds),
                json.dumps(config, sort_keys=True),
                now,
                now if seeded else None,
                previous_crawl_id,
            ),
        )
        assert cur.lastrowid is not None
        crawl_id = cur.lastrowid
        if enqueue:
            frontier = Frontier(conn, crawl_id, max_urls=max_urls, max_cache_age_s=max_cache_age_s)
            frontier.add_seeds(enqueue, now)
    return crawl_id


def is_seeded(conn: sqlite3.Connection, crawl_id: int) -> bool:
    """Does the frontier hold everything the crawl starts from (seeds, sitemap pages)?"""
    row = conn.execute("SELECT seeded_at IS NOT NULL FROM crawl WHERE id = ?", (crawl_id,))
    return bool(row.fetchone()[0])


def is_finished(conn: sqlite3.Connection, crawl_id: int) -> bool:
    """Has a worker marked the crawl finished?"""
    row = conn.execute("SELECT state = 'finished' FROM crawl WHERE id = ?", (crawl_id,)).fetchone()
    return row is not None and bool(row[0])  # a crawl deleted meanwhile is not finished


def mark_seeded(conn: sqlite3.Connection, crawl_id: int, now: float) -> None:
    """Record that the seeds and the sitemaps' pages are in the frontier."""
    with atomic(conn):
        conn.execute(
            "UPDATE crawl SET seeded_at = COALESCE(seeded_at, ?) WHERE id = ?", (now, crawl_id)
        )


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
