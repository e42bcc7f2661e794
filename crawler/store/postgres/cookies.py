"""A crawl's cookies on PostgreSQL, and the hosts whose HEAD answers are not trusted.

The same questions as ``crawler.store.sqlite.cookies`` answers; each function
runs on a connection the caller holds (inside its transaction, when it has one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crawler.config import DEFAULT_MAX_COOKIES_PER_HOST
from crawler.models import Cookie

_UPSERT = """
INSERT INTO cookie (crawl_id, domain, path, name, value, host_only, secure, http_only,
                    expires_at, updated_at)
SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[],
                         $7::boolean[], $8::boolean[], $9::double precision[],
                         $10::double precision[])
ON CONFLICT (crawl_id, domain, path, name) DO UPDATE SET
    value = excluded.value, host_only = excluded.host_only, secure = excluded.secure,
    http_only = excluded.http_only, expires_at = excluded.expires_at,
    updated_at = excluded.updated_at
"""

# Past the bound, a domain keeps its live cookies first, the newest first.
_BOUND = """
DELETE FROM cookie
WHERE crawl_id = $1 AND domain = $2 AND (path, name) NOT IN (
    SELECT path, name FROM cookie WHERE crawl_id = $1 AND domain = $2
    ORDER BY (expires_at IS NOT NULL AND expires_at <= $3), updated_at DESC
    LIMIT $4
)
"""

_SELECT = (
    "SELECT domain, path, name, value, host_only, secure, http_only, expires_at "
    "FROM cookie WHERE crawl_id = $1 AND updated_at >= $2"
)


async def put_cookies(
    conn: Any,
    crawl_id: int,
    cookies: Sequence[Cookie],
    now: float,
    max_per_host: int = DEFAULT_MAX_COOKIES_PER_HOST,
) -> None:
    """Store cookies set or deleted (expired) since the last call, bounded per domain."""
    if not cookies:
        return
    latest = {(c.domain, c.path, c.name): c for c in cookies}  # one row per key per statement
    rows = [latest[key] for key in sorted(latest)]
    await conn.execute(
        _UPSERT,
        crawl_id,
        [c.domain for c in rows],
        [c.path for c in rows],
        [c.name for c in rows],
        [c.value for c in rows],
        [c.host_only for c in rows],
        [c.secure for c in rows],
        [c.http_only for c in rows],
        [c.expires_at for c in rows],
        [now] * len(rows),
    )
    for domain in sorted({c.domain for c in rows}):
        await conn.execute(_BOUND, crawl_id, domain, now, max_per_host)


async def get_cookies(conn: Any, crawl_id: int, since: float | None) -> list[Cookie]:
    """The crawl's cookies stored at or after ``since`` (all when None); deletions included."""
    rows = await conn.fetch(_SELECT, crawl_id, float("-inf") if since is None else since)
    return [
        Cookie(
            domain=r[0],
            path=r[1],
            name=r[2],
            value=r[3],
            host_only=bool(r[4]),
            secure=bool(r[5]),
            http_only=bool(r[6]),
            expires_at=None if r[7] is None else float(r[7]),
        )
        for r in rows
    ]


async def head_unreliable_hosts(conn: Any, crawl_id: int) -> list[str]:
    """Hosts of this crawl where a GET overruled HEAD: asked with GET alone from now on."""
    rows = await conn.fetch(
        "SELECT DISTINCT h.name FROM result r "
        "JOIN url u ON u.id = r.url_id JOIN host h ON h.id = u.host_id "
        "WHERE r.head_status IS NOT NULL AND u.crawl_id = $1 ORDER BY h.name",
        crawl_id,
    )
    return [str(r[0]) for r in rows]
