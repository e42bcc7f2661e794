"""Which backend a ``--db`` names, and opening a crawl on it.

``--db postgresql://user@host/dbname`` (or ``postgres://``) selects PostgreSQL;
anything else is a SQLite file: a path, or a ``sqlite:`` URL
(``sqlite:crawl.db``, ``sqlite:///abs/path/crawl.db``). The runner and the CLI
call only these functions, so everything above ``crawler/store`` is the same
code for both:

- ``create_crawl``: record a new crawl and enqueue its seeds (one
  transaction), return its ``FrontierStore``;
- ``open_crawl``: a recorded crawl (the given id, else the latest unfinished,
  else the latest) with its record;
- ``load_report``: the ``ReportData`` of a crawl, in one snapshot;
- ``load_record``: a crawl's record (what a re-crawl starts from);
- ``load_diff``: two crawls compared (``CrawlDiff``), in one snapshot.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from crawler.config import CrawlSettings, Durability
from crawler.errors import UsageError
from crawler.models import CrawlRecord, Discovered
from crawler.report.diff import CrawlDiff
from crawler.report.model import ReportData
from crawler.store.contract import FrontierStore
from crawler.store.sqlite import crawls, db
from crawler.store.sqlite import diff as sqlite_diff
from crawler.store.sqlite import report as sqlite_report
from crawler.store.sqlite.store import AsyncFrontier

T = TypeVar("T")

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SQLITE_SCHEME = "sqlite:"


def is_postgres_url(db_name: str | Path) -> bool:
    """Does ``--db`` name a PostgreSQL database?"""
    return isinstance(db_name, str) and db_name.startswith(POSTGRES_SCHEMES)


def sqlite_path(db_name: str | Path) -> str | Path:
    """The file a SQLite ``--db`` names (a path, or a ``sqlite:`` URL)."""
    if isinstance(db_name, str) and db_name.startswith(SQLITE_SCHEME):
        rest = db_name[len(SQLITE_SCHEME) :]
        return rest[2:] if rest.startswith("//") else rest
    return db_name


def create_crawl(
    db_name: str | Path,
    recorded: list[str],
    settings: CrawlSettings,
    *,
    seeds: Sequence[Discovered] = (),
    seeded: bool = True,
    durability: Durability = "normal",
    crawl_id: int | None = None,
    previous_crawl_id: int | None = None,
) -> FrontierStore:
    """Record a new crawl (keeping earlier ones) with its seeds in its frontier; its store.

    ``recorded`` are the seeds as the user gave them, ``seeds`` the same
    classified: both are written in ONE transaction, so a crash never leaves
    a recorded crawl with an empty frontier (which would read as finished).
    ``seeded`` False: the crawl's sitemaps are still to be collected
    (``FrontierStore.mark_seeded``). ``crawl_id`` records it under an id
    reserved beforehand, as the service does for its crawls (on SQLite, for the
    runs of one definition, which share a file).
    ``previous_crawl_id`` makes it a re-crawl of that crawl (``previous_pages``).
    """
    if is_postgres_url(db_name):
        new = _NewCrawl(recorded, seeds, seeded, previous_crawl_id)
        return _postgres(str(db_name), crawl_id, settings, new, durability)[0]
    conn = db.open_database(sqlite_path(db_name), durability=durability)
    try:
        crawl_id = crawls.create(
            conn,
            recorded,
            settings.model_dump(),
            time.time(),
            enqueue=seeds,
            seeded=seeded,
            max_urls=settings.max_urls,
            max_cache_age_s=settings.max_cache_age_s,
            previous_crawl_id=previous_crawl_id,
            crawl_id=crawl_id,
        )
    except BaseException:
        conn.close()
        raise
    return _sqlite_store(conn, crawl_id, settings)


def open_crawl(
    db_name: str | Path, crawl_id: int | None = None, *, durability: Durability = "normal"
) -> tuple[FrontierStore, CrawlRecord]:
    """A recorded crawl's store and record: ``crawl_id``, else the latest unfinished one."""
    if is_postgres_url(db_name):
        return _postgres(str(db_name), crawl_id, None, None, durability)
    conn = db.open_database(sqlite_path(db_name), durability=durability)
    try:
        if crawl_id is not None:
            record = crawls.get(conn, crawl_id)
        else:
            found = crawls.latest_unfinished(conn)
            record = found if found is not None else crawls.get(conn)
        settings = CrawlSettings.model_validate(record.config)
    except BaseException:
        conn.close()
        raise
    return _sqlite_store(conn, record.id, settings), record


def load_record(db_name: str | Path, crawl_id: int | None = None) -> CrawlRecord:
    """A crawl's record (the latest when no id is given), from either backend."""

    async def from_postgres(conn: Any) -> CrawlRecord:
        from crawler.store.postgres import crawls as pg_crawls  # asyncpg only when used

        return await pg_crawls.get(conn, crawl_id)

    return _read_once(db_name, lambda reader: crawls.get(reader, crawl_id), from_postgres)


def load_report(
    db_name: str | Path, crawl_id: int | None = None, fmt: str | None = None
) -> ReportData:
    """The report of a crawl (the latest when no id is given), from either backend."""

    async def from_postgres(conn: Any) -> ReportData:
        from crawler.store.postgres import report as pg_report  # asyncpg only when used

        return await pg_report.load(conn, crawl_id, fmt)

    return _read_once(
        db_name, lambda reader: sqlite_report.load(reader, crawl_id, fmt), from_postgres
    )


def load_diff(
    db_name: str | Path, from_crawl: int | None = None, to_crawl: int | None = None
) -> CrawlDiff:
    """Two crawls compared, from either backend.

    Default ``to_crawl``: the latest finished crawl; default ``from_crawl``: the
    finished crawl before it with the same seeds (none: ``from_crawl`` 0, and
    every broken link is new). UsageError for an unknown id or no finished crawl.
    """

    async def from_postgres(conn: Any) -> CrawlDiff:
        from crawler.store.postgres import diff as pg_diff  # asyncpg only when used

        return await pg_diff.load(conn, from_crawl, to_crawl)

    return _read_once(
        db_name, lambda reader: sqlite_diff.load(reader, from_crawl, to_crawl), from_postgres
    )


def _read_once(
    db_name: str | Path,
    from_sqlite: Callable[[sqlite3.Connection], T],
    from_postgres: Callable[[Any], Awaitable[T]],
) -> T:
    """One read in one snapshot, on a connection of its own, whichever backend holds it."""
    if is_postgres_url(db_name):
        from crawler.store.postgres import schema  # asyncpg only when used
        from crawler.store.postgres.loop import BackgroundLoop

        async def read() -> T:
            conn = await schema.connect_reader(str(db_name))
            try:
                return await from_postgres(conn)
            finally:
                await conn.close()

        runner = BackgroundLoop("crawler-read")
        try:
            return runner.run(read())
        finally:
            runner.close()
    try:
        reader = db.open_reader(sqlite_path(db_name))
    except sqlite3.Error as exc:
        raise UsageError(f"{db_name}: {exc}") from exc
    try:
        return from_sqlite(reader)
    finally:
        reader.close()


def _sqlite_store(conn: Any, crawl_id: int, settings: CrawlSettings) -> AsyncFrontier:
    return AsyncFrontier(
        conn, crawl_id, max_urls=settings.max_urls, max_cache_age_s=settings.max_cache_age_s
    )


@dataclass(frozen=True)
class _NewCrawl:
    recorded: list[str]
    seeds: Sequence[Discovered]
    seeded: bool
    previous_crawl_id: int | None = None


def _postgres(
    dsn: str,
    crawl_id: int | None,
    settings: CrawlSettings | None,
    new: _NewCrawl | None,
    durability: Durability,
) -> tuple[FrontierStore, CrawlRecord]:
    """Connect; record a ``new`` crawl or find one; return its store and record."""
    from crawler.store.postgres import crawls as pg_crawls  # asyncpg only when used
    from crawler.store.postgres import schema
    from crawler.store.postgres.frontier import PostgresFrontier
    from crawler.store.postgres.loop import BackgroundLoop

    async def find(pool: Any) -> CrawlRecord:
        async with pool.acquire() as conn, conn.transaction():
            if new is not None:
                assert settings is not None
                new_id = await pg_crawls.create(
                    conn,
                    new.recorded,
                    settings.model_dump(),
                    time.time(),
                    enqueue=new.seeds,
                    seeded=new.seeded,
                    max_urls=settings.max_urls,
                    max_cache_age_s=settings.max_cache_age_s,
                    crawl_id=crawl_id,
                    previous_crawl_id=new.previous_crawl_id,
                )
                return await pg_crawls.get(conn, new_id)
            if crawl_id is not None:
                return await pg_crawls.get(conn, crawl_id)
            found = await pg_crawls.latest_unfinished(conn)
            return found if found is not None else await pg_crawls.get(conn)

    runner = BackgroundLoop()
    pool = None
    try:
        pool = runner.run(schema.create_pool(dsn, durability=durability))
        record = runner.run(find(pool))
        if settings is None:
            settings = CrawlSettings.model_validate(record.config)
    except BaseException:
        if pool is not None:
            runner.run(pool.close())
        runner.close()
        raise
    store = PostgresFrontier(
        dsn,
        record.id,
        runner=runner,
        pool=pool,
        max_urls=settings.max_urls,
        max_cache_age_s=settings.max_cache_age_s,
    )
    return store, record
