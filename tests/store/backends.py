"""The two backends behind one test interface: open a crawl's store, look inside it.

The contract suite (``test_contract_*.py``) drives a ``FrontierStore`` only
through the Protocol and reads what it wrote through ``load_report`` where the
report can answer. Where a test must look at rows the report does not show
(lease owners, retry times, which link table holds a link), it asks a
``Backend``: the same questions, answered by SQL of each backend's own dialect.
That SQL lives here and nowhere else in the suite.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from crawler.config import CrawlSettings
from crawler.report.model import ReportData
from crawler.store import open as store_open
from crawler.store.contract import FrontierStore

T0 = 1_000_000.0

_ROWS = (
    "SELECT u.url, u.id, u.kind, u.state, u.depth, u.hop, u.attempts, u.next_attempt_at, "
    "u.lease_owner, u.lease_expires_at, h.name FROM url u LEFT JOIN host h ON h.id = u.host_id"
)
_LINKS = (
    "SELECT s.url, t.url, l.element, l.fragment FROM {table} l "
    "JOIN url s ON s.id = l.source_id JOIN url t ON t.id = l.target_id"
)
_RESULTS = (
    "SELECT u.url, r.class, r.status, r.error, t.url FROM result r "
    "JOIN url u ON u.id = r.url_id LEFT JOIN url t ON t.id = r.redirect_to_id"
)


@dataclass(frozen=True)
class Row:
    """A ``url`` row as the contract tests see it (both backends have these columns)."""

    id: int
    kind: int
    state: int
    depth: int
    hop: int
    attempts: int
    next_attempt_at: float
    lease_owner: str | None
    lease_expires_at: float | None
    host: str | None


class Backend:
    """One database on one backend, with the stores opened on it (closed at teardown)."""

    # The links reports read (to URLs not settled): two tables on each backend
    # (appended, then moved in batches: crawler/store/{sqlite,postgres}/links.py).
    open_links = (
        "(SELECT target_id, source_id, fragment, element FROM link_open "
        "UNION ALL SELECT target_id, source_id, fragment, element FROM link_fresh)"
    )
    settled_links = "link_settled"

    name: str

    def __init__(self, db: str) -> None:
        self.db = db
        self.stores: list[FrontierStore] = []

    # -- stores -------------------------------------------------------------------

    async def store(
        self, config: dict[str, Any] | None = None, *, crawl_id: int | None = None, **options: Any
    ) -> FrontierStore:
        """A new crawl's store (``config``: its settings), or another store on ``crawl_id``.

        Another store on a crawl has empty caches, as a second worker or a
        resumed process has; ``options`` (max_urls, max_cache_age_s) are its own.
        """
        if crawl_id is None:
            settings = CrawlSettings(**{**(config or {}), **options})
            store = await asyncio.to_thread(store_open.create_crawl, self.db, [], settings)
        else:
            store = await asyncio.to_thread(self._open, crawl_id, options)
        self.stores.append(store)
        return store

    def _open(self, crawl_id: int, options: dict[str, Any]) -> FrontierStore:
        raise NotImplementedError

    def shrink_seen_cache(self, store: FrontierStore, size: int) -> None:
        """Make the store's cache of seen URLs tiny, so the UNIQUE key does the dedup."""
        raise NotImplementedError

    async def report(self, crawl_id: int) -> ReportData:
        return await asyncio.to_thread(store_open.load_report, self.db, crawl_id)

    async def close(self) -> None:
        for store in self.stores:
            await asyncio.to_thread(store.close)

    # -- looking inside -------------------------------------------------------------

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of a query; ``?`` marks parameters on both backends."""
        raise NotImplementedError

    async def execute(self, sql: str, *args: Any) -> None:
        raise NotImplementedError

    async def rows(self, crawl_id: int | None = None) -> dict[str, Row]:
        if crawl_id is None:
            found = await self.fetch(_ROWS)
        else:
            found = await self.fetch(_ROWS + " WHERE u.crawl_id = ?", crawl_id)
        return {r[0]: Row(*r[1:]) for r in found}

    async def links(self, crawl_id: int | None = None) -> set[tuple[str, str, str, str]]:
        """(source url, target url, element, fragment) of every link, whichever table holds it."""
        if crawl_id is None:
            return set(await self.fetch(_LINKS.format(table="link")))
        return set(
            await self.fetch(_LINKS.format(table="link") + " WHERE s.crawl_id = ?", crawl_id)
        )

    async def link_tables(
        self, crawl_id: int | None = None
    ) -> dict[str, set[tuple[str, str, str]]]:
        """(source, target, fragment) per link table: open (reported) and settled (never)."""
        where, args = ("", ()) if crawl_id is None else (" WHERE s.crawl_id = ?", (crawl_id,))
        return {
            name: {
                (s, t, fr)
                for s, t, _, fr in await self.fetch(_LINKS.format(table=table) + where, *args)
            }
            for name, table in (("open", self.open_links), ("settled", self.settled_links))
        }

    async def results(self, crawl_id: int | None = None) -> dict[str, tuple[Any, ...]]:
        """url -> (class, status, error, redirect target url)."""
        if crawl_id is None:
            found = await self.fetch(_RESULTS)
        else:
            found = await self.fetch(_RESULTS + " WHERE u.crawl_id = ?", crawl_id)
        return {r[0]: tuple(r[1:]) for r in found}

    async def crawl_state(self, crawl_id: int) -> tuple[str, float | None]:
        (row,) = await self.fetch("SELECT state, finished_at FROM crawl WHERE id = ?", crawl_id)
        return row[0], row[1]

    async def view(self, name: str, crawl_id: int) -> list[dict[str, Any]]:
        """Rows of a documented view (the SQL interface both backends offer)."""
        raise NotImplementedError

    async def merge_links(self) -> int:
        """Move the open links appended so far into the target-keyed table; rows moved."""
        raise NotImplementedError

    async def fresh_links(self) -> int:
        """Open links appended and not merged yet."""
        ((n,),) = await self.fetch("SELECT count(*) FROM link_fresh")
        return int(n)

    async def add_worker(self, crawl_id: int, token: str, pid: int, heartbeat_at: float) -> None:
        """A worker row as another process (maybe dead, maybe silent) would have left it."""
        await self.execute(
            "INSERT INTO worker (token, crawl_id, pid, hostname, started_at, heartbeat_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            token,
            crawl_id,
            pid,
            socket.gethostname(),
            heartbeat_at,
            heartbeat_at,
        )

    async def workers(self) -> set[str]:
        return {r[0] for r in await self.fetch("SELECT token FROM worker")}


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self._conn: sqlite3.Connection | None = None

    def _open(self, crawl_id: int, options: dict[str, Any]) -> FrontierStore:
        from crawler.store.sqlite import db
        from crawler.store.sqlite.store import AsyncFrontier

        return AsyncFrontier(db.open_database(self.db), crawl_id, **options)

    def shrink_seen_cache(self, store: FrontierStore, size: int) -> None:
        store.sync._seen.resize(size)  # type: ignore[attr-defined]

    async def merge_links(self) -> int:
        from crawler.store.sqlite import links

        return links.merge(self._connection())

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(self.db, isolation_level=None, timeout=30)
        return self._conn

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._connection().execute(sql, args).fetchall()]

    async def execute(self, sql: str, *args: Any) -> None:
        self._connection().execute(sql, args)

    async def view(self, name: str, crawl_id: int) -> list[dict[str, Any]]:
        cur = self._connection().execute(f"SELECT * FROM {name} WHERE crawl_id = ?", (crawl_id,))
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    async def close(self) -> None:
        await super().close()
        if self._conn is not None:
            self._conn.close()


class PostgresBackend(Backend):
    name = "postgresql"
    # A page's settled links in one row (migrations/postgresql/0016).
    settled_links = (
        "(SELECT target_id, source_id, fragment, element FROM link_settled "
        "UNION ALL SELECT t.target_id, p.source_id, '', t.element FROM link_settled_page p "
        "CROSS JOIN LATERAL unnest(p.target_ids, p.elements) AS t (target_id, element))"
    )

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._conn: Any = None

    def _open(self, crawl_id: int, options: dict[str, Any]) -> FrontierStore:
        from crawler.store.postgres.frontier import PostgresFrontier

        return PostgresFrontier.connect(self.db, crawl_id, **options)

    def shrink_seen_cache(self, store: FrontierStore, size: int) -> None:
        store._recorder._seen.resize(size)  # type: ignore[attr-defined]

    async def _connection(self) -> Any:
        if self._conn is None:
            self._conn = await asyncpg.connect(self.db)
        return self._conn

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        conn = await self._connection()
        return [tuple(r) for r in await conn.fetch(_dollars(sql), *args)]

    async def execute(self, sql: str, *args: Any) -> None:
        conn = await self._connection()
        await conn.execute(_dollars(sql), *args)

    async def view(self, name: str, crawl_id: int) -> list[dict[str, Any]]:
        conn = await self._connection()
        rows = await conn.fetch(f"SELECT * FROM {name} WHERE crawl_id = $1", crawl_id)
        return [dict(r) for r in rows]

    async def merge_links(self) -> int:
        from crawler.store.postgres import links

        return await links.merge(await self._connection()) or 0

    async def close(self) -> None:
        await super().close()
        if self._conn is not None:
            await self._conn.close()


def _dollars(sql: str) -> str:
    """``?`` placeholders in PostgreSQL's ``$n`` form."""
    parts = sql.split("?")
    return "".join(p + (f"${i + 1}" if i < len(parts) - 1 else "") for i, p in enumerate(parts))
