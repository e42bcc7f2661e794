"""Per-host facts a crawl keeps: robots.txt as fetched.

Stored so a resumed crawl does not request robots.txt again, and so users can
see with SQL which rules their crawl obeyed.
"""

from __future__ import annotations

import sqlite3

from crawler.store.sqlite.db import atomic


def get_robots(conn: sqlite3.Connection, crawl_id: int, host: str) -> tuple[int | None, str] | None:
    """(status, body) of the stored robots.txt for ``host``, or None if never fetched."""
    row = conn.execute(
        "SELECT r.status, r.body FROM robots r JOIN host h ON h.id = r.host_id "
        "WHERE r.crawl_id = ? AND h.name = ?",
        (crawl_id, host),
    ).fetchone()
    return None if row is None else (row[0], row[1])


def put_robots(
    conn: sqlite3.Connection, crawl_id: int, host: str, status: int | None, body: str, now: float
) -> None:
    """Store ``host``'s robots.txt for this crawl."""
    with atomic(conn):
        conn.execute("INSERT OR IGNORE INTO host (name) VALUES (?)", (host,))
        conn.execute(
            "INSERT OR REPLACE INTO robots (crawl_id, host_id, status, body, fetched_at) "
            "SELECT ?, id, ?, ?, ? FROM host WHERE name = ?",
            (crawl_id, status, body, now, host),
        )
