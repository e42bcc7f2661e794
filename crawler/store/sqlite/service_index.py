"""The service's index of crawls: ``DATA/service.db``, one row per crawl.

Each crawl's results live in its own file, ``DATA/crawls/<id>.db``, written by
the engine as with the CLI. The index holds what a crawl database cannot say:

- the service-wide id, handed out once (AUTOINCREMENT: a deleted id is never
  reused, so a stale file can never be taken for a new crawl);
- the state the user asked for: queued, paused, cancelled, deleting, which the
  crawl table (running or finished) has no room for;
- the queue order (``queued_at``), so restarts keep it;
- seeds and settings of crawls not started yet (their file does not exist).

Listing crawls reads this one small table instead of opening every file.
Writes are rare (state changes) and run on one thread, in order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from crawler.errors import ForeignDatabaseError
from crawler.store.sqlite.db import atomic

APPLICATION_ID = 0x43524C53  # "CRLS": a crawler service index
SCHEMA_VERSION = 1
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS service_crawl (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    state        TEXT    NOT NULL,   -- queued running paused cancelled finished failed deleting
    seeds        TEXT    NOT NULL,   -- JSON array as given
    settings     TEXT    NOT NULL,   -- JSON of the recorded CrawlSettings
    created_at   REAL    NOT NULL,
    queued_at    REAL    NOT NULL,   -- queue order; set again on resume
    started_at   REAL,
    finished_at  REAL,
    error        TEXT
)
"""
_COLUMNS = "id, state, seeds, settings, created_at, queued_at, started_at, finished_at, error"


@dataclass(slots=True)
class Entry:
    """One crawl as the service knows it (a row of ``service_crawl``)."""

    id: int
    state: str
    seeds: list[str]
    settings: dict[str, Any]
    created_at: float
    queued_at: float
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None


class Index:
    """Synchronous access to ``service.db``; ``AsyncIndex`` runs it on one thread."""

    def __init__(self, path: Path) -> None:
        _check_identity(path)
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout = 30000")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        with atomic(self._conn):
            self._conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self._conn.execute(_SCHEMA)
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def entries(self) -> list[Entry]:
        rows = self._conn.execute(f"SELECT {_COLUMNS} FROM service_crawl ORDER BY id").fetchall()
        return [_entry(row) for row in rows]

    def insert(self, seeds: list[str], settings: dict[str, Any], now: float) -> Entry:
        with atomic(self._conn):
            cur = self._conn.execute(
                "INSERT INTO service_crawl (state, seeds, settings, created_at, queued_at) "
                "VALUES ('queued', ?, ?, ?, ?)",
                (json.dumps(seeds), json.dumps(settings, sort_keys=True), now, now),
            )
        assert cur.lastrowid is not None
        return Entry(cur.lastrowid, "queued", seeds, settings, now, now)

    def update(self, entry: Entry) -> None:
        with atomic(self._conn):
            self._conn.execute(
                "UPDATE service_crawl SET state = ?, queued_at = ?, started_at = ?, "
                "finished_at = ?, error = ? WHERE id = ?",
                (
                    entry.state,
                    entry.queued_at,
                    entry.started_at,
                    entry.finished_at,
                    entry.error,
                    entry.id,
                ),
            )

    def delete(self, crawl_id: int) -> None:
        with atomic(self._conn):
            self._conn.execute("DELETE FROM service_crawl WHERE id = ?", (crawl_id,))

    def ping(self) -> None:
        self._conn.execute("SELECT count(*) FROM service_crawl").fetchone()

    def close(self) -> None:
        self._conn.close()


class AsyncIndex:
    """``Index`` on a single writer thread: calls run one at a time, in order."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="service-index"
        )

    @classmethod
    async def open(cls, path: Path) -> AsyncIndex:
        return cls(await asyncio.to_thread(Index, path))

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def entries(self) -> list[Entry]:
        return await self._run(self._index.entries)

    async def insert(self, seeds: list[str], settings: dict[str, Any], now: float) -> Entry:
        return await self._run(lambda: self._index.insert(seeds, settings, now))

    async def update(self, entry: Entry) -> None:
        snapshot = dataclasses.replace(entry)  # the caller may change it meanwhile
        await self._run(lambda: self._index.update(snapshot))

    async def delete(self, crawl_id: int) -> None:
        await self._run(lambda: self._index.delete(crawl_id))

    async def ping(self) -> None:
        await self._run(self._index.ping)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._index.close()


def _entry(row: tuple[Any, ...]) -> Entry:
    return Entry(
        id=row[0],
        state=row[1],
        seeds=json.loads(row[2]),
        settings=json.loads(row[3]),
        created_at=row[4],
        queued_at=row[5],
        started_at=row[6],
        finished_at=row[7],
        error=row[8],
    )


def _check_identity(path: Path) -> None:
    """Refuse a file that is not a service index (left untouched)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ForeignDatabaseError(f"{path}: not a service index ({exc})") from exc
    if app_id != APPLICATION_ID:
        raise ForeignDatabaseError(f"{path}: not a crawler service index")
    if version > SCHEMA_VERSION:
        raise ForeignDatabaseError(
            f"{path}: made by a newer crawler (index schema {version}, this one knows "
            f"{SCHEMA_VERSION})"
        )
