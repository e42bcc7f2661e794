"""A crawl's cookies on SQLite, and the hosts whose HEAD answers are not trusted.

The cookie rows are what lets a resumed run, and every worker of a crawl,
send what the site set (see ``crawler.net.cookies``). Each function is one
transaction on the writer's connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from crawler.config import DEFAULT_MAX_COOKIES_PER_HOST
from crawler.models import Cookie
from crawler.store.sqlite.db import atomic

_UPSERT = """
INSERT INTO cookie (crawl_id, domain, path, name, value, host_only, secure, http_only,
                    expires_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (crawl_id, domain, path, name) DO UPDATE SET
    value = excluded.value, host_only = excluded.host_only, secure = excluded.secure,
    http_only = excluded.http_only, expires_at = excluded.expires_at,
    updated_at = excluded.updated_at
"""

# Past the bound, a domain keeps its live cookies first, the newest first.
_BOUND = """
DELETE FROM cookie
WHERE crawl_id = ?1 AND domain = ?2 AND (path, name) NOT IN (
    SELECT path, name FROM cookie WHERE crawl_id = ?1 AND domain = ?2
    ORDER BY (expires_at IS NOT NULL AND expires_at <= ?3), updated_at DESC
    LIMIT ?4
)
"""

_SELECT = (
    "SELECT domain, path, name, value, host_only, secure, http_only, expires_at "
    "FROM cookie WHERE crawl_id = ? AND updated_at >= ?"
)


def put_cookies(
    conn: sqlite3.Connection,
    crawl_id: int,
    cookies: Sequence[Cookie],
    now: float,
    max_per_host: int = DEFAULT_MAX_COOKIES_PER_HOST,
) -> None:
    """Store cookies set or deleted (expired) since the last call, bounded per domain."""
    if not cookies:
        return
    with atomic(conn):
        conn.executemany(
            _UPSERT,
            [
                (
                    crawl_id,
                    c.domain,
                    c.path,
                    c.name,
                    c.value,
                    c.host_only,
                    c.secure,
                    c.http_only,
                    c.expires_at,
                    now,
                )
                for c in cookies
            ],
        )
        for domain in sorted({c.domain for c in cookies}):
            conn.execute(_BOUND, (crawl_id, domain, now, max_per_host))


def get_cookies(conn: sqlite3.Connection, crawl_id: int, since: float | None) -> list[Cookie]:
    """The crawl's cookies stored at or after ``since`` (all when None); deletions included."""
    rows = conn.execute(_SELECT, (crawl_id, float("-inf") if since is None else since))
    return [
        Cookie(
            domain=r[0],
            path=r[1],
            name=r[2],
            value=r[3],
            host_only=bool(r[4]),
            secure=bool(r[5]),
            http_only=bool(r[6]),
            expires_at=r[7],
        )
        for r in rows
    ]


def head_unreliable_hosts(conn: sqlite3.Connection, crawl_id: int) -> list[str]:
    """Hosts of this crawl where a GET overruled HEAD: asked with GET alone from now on."""
    rows = conn.execute(
        "SELECT DISTINCT h.name FROM result r "
        "JOIN url u ON u.id = r.url_id JOIN host h ON h.id = u.host_id "
        "WHERE r.head_status IS NOT NULL AND u.crawl_id = ? ORDER BY h.name",
        (crawl_id,),
    )
    return [name for (name,) in rows]
