"""The service's index of crawls: ``DATA/service.db``, one row per crawl.

A one-off crawl's results live in its own file, ``DATA/crawls/<id>.db``,
written by the engine as with the CLI (its one crawl). The runs of one crawl
definition share one file, ``DATA/definitions/<definition id>.db``, each run
a crawl in it under the service's id: so each run is a re-crawl of the
previous one (validators and stored links at hand) and their diff is read in
one snapshot. The index holds what a crawl database cannot say:

- the service-wide id, handed out once (AUTOINCREMENT: a deleted id is never
  reused, so a stale file can never be taken for a new crawl);
- the state the user asked for: queued, paused, cancelled, deleting, which the
  crawl table (running or finished) has no room for;
- the queue order (``queued_at``), so restarts keep it;
- seeds and settings of crawls not started yet (their file does not exist);
- crawl definitions (recurring crawls) with their schedule position, the
  definition each run belongs to, and webhook deliveries (schema version 2;
  a version 1 index gains them when opened). A run's delivery is recorded in
  the transaction that records the run finished (``finish``) and deleted with
  the run (``delete``); version 3 indexes deliveries by crawl and drops those
  an older version left behind its deleted runs.

Deleting a one-off crawl unlinks its file: its space goes back to the file
system at once. Deleting a definition's run removes its rows from the shared
file in short batches (``crawl_delete``), so a run writing to the same file
waits at most one batch; the pages freed are reused by the next runs (the
file stops growing at about ``keep_runs`` + 1 runs). Deleting the definition
unlinks its file.

Listing crawls reads this one small table instead of opening every file.
Writes are rare (state changes) and run on one thread, in order.

``SqliteServiceStore`` is the ``crawler.store.service.ServiceStore`` of these
files: this index, and the reads of ``reads`` on each crawl's file.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from crawler.errors import ForeignDatabaseError, StoreError, UsageError
from crawler.report.diff import CrawlDiff
from crawler.report.model import ReportData
from crawler.store.crawl_stats import CrawlStats
from crawler.store.service import CrawlTarget, Definition, Delivery, Entry, Snapshot, WorkerRow
from crawler.store.service_rows import (
    DELIVERY_COLUMNS,
    DELIVERY_INSERT_COLUMNS,
    delivery_from_row,
    delivery_insert_values,
    delivery_update_values,
    entry_from_row,
)
from crawler.store.sqlite import crawl_delete, crawls, db, reads
from crawler.store.sqlite.db import atomic
from crawler.store.sqlite.frontier import Frontier

APPLICATION_ID = 0x43524C53  # "CRLS": a crawler service index
SCHEMA_VERSION = 3
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
_SCHEMA_2 = (
    """
CREATE TABLE IF NOT EXISTS service_definition (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    spec         TEXT    NOT NULL,   -- JSON of the validated definition (webhook secret too)
    created_at   REAL    NOT NULL,
    updated_at   REAL    NOT NULL,
    next_run_at  REAL                -- the schedule's position
)
""",
    """
CREATE TABLE IF NOT EXISTS service_delivery (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    definition_id   INTEGER NOT NULL,
    crawl_id        INTEGER NOT NULL,
    url             TEXT    NOT NULL,
    body            BLOB    NOT NULL,   -- the bytes sent and signed
    state           TEXT    NOT NULL,   -- pending delivered failed
    attempts        INTEGER NOT NULL,
    created_at      REAL    NOT NULL,
    next_attempt_at REAL    NOT NULL,
    last_status     INTEGER,
    last_error      TEXT,
    finished_at     REAL
)
""",
    "CREATE INDEX IF NOT EXISTS service_delivery_crawl ON service_delivery (crawl_id)",
)
# Version 3: deliveries go with their run; drop those older versions kept behind.
_ORPHAN_DELIVERIES = (
    "DELETE FROM service_delivery WHERE crawl_id NOT IN (SELECT id FROM service_crawl)"
)
_COLUMNS = (
    "id, state, seeds, settings, created_at, queued_at, started_at, finished_at, error, "
    "definition_id"
)
_DEFINITION_COLUMNS = "id, spec, created_at, updated_at, next_run_at"


class Index:
    """Synchronous access to ``service.db``; ``AsyncIndex`` runs it on one thread."""

    def __init__(self, path: Path) -> None:
        _check_identity(path)
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout = 30000")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        with atomic(self._conn):
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            self._conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self._conn.execute(_SCHEMA)
            columns = {row[1] for row in self._conn.execute("PRAGMA table_info(service_crawl)")}
            if "definition_id" not in columns:  # a version 1 index
                self._conn.execute("ALTER TABLE service_crawl ADD COLUMN definition_id INTEGER")
            for statement in _SCHEMA_2:
                self._conn.execute(statement)
            if version < SCHEMA_VERSION:
                self._conn.execute(_ORPHAN_DELIVERIES)
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def entries(self) -> list[Entry]:
        rows = self._conn.execute(f"SELECT {_COLUMNS} FROM service_crawl ORDER BY id").fetchall()
        return [entry_from_row(row) for row in rows]

    def insert(
        self,
        seeds: list[str],
        settings: dict[str, Any],
        now: float,
        definition_id: int | None = None,
    ) -> Entry:
        with atomic(self._conn):
            cur = self._conn.execute(
                "INSERT INTO service_crawl "
                "(state, seeds, settings, created_at, queued_at, definition_id) "
                "VALUES ('queued', ?, ?, ?, ?, ?)",
                (json.dumps(seeds), json.dumps(settings, sort_keys=True), now, now, definition_id),
            )
        assert cur.lastrowid is not None
        return Entry(
            cur.lastrowid, "queued", seeds, settings, now, now, definition_id=definition_id
        )

    def definitions(self) -> list[Definition]:
        rows = self._conn.execute(
            f"SELECT {_DEFINITION_COLUMNS} FROM service_definition ORDER BY id"
        ).fetchall()
        return [Definition(r[0], json.loads(r[1]), r[2], r[3], r[4]) for r in rows]

    def insert_definition(
        self, spec: dict[str, Any], now: float, next_run_at: float | None
    ) -> Definition:
        with atomic(self._conn):
            cur = self._conn.execute(
                "INSERT INTO service_definition (spec, created_at, updated_at, next_run_at) "
                "VALUES (?, ?, ?, ?)",
                (json.dumps(spec, sort_keys=True), now, now, next_run_at),
            )
        assert cur.lastrowid is not None
        return Definition(cur.lastrowid, spec, now, now, next_run_at)

    def update_definition(self, definition: Definition) -> None:
        with atomic(self._conn):
            self._conn.execute(
                "UPDATE service_definition SET spec = ?, updated_at = ?, next_run_at = ? "
                "WHERE id = ?",
                (
                    json.dumps(definition.spec, sort_keys=True),
                    definition.updated_at,
                    definition.next_run_at,
                    definition.id,
                ),
            )

    def delete_definition(self, definition_id: int) -> None:
        with atomic(self._conn):
            self._conn.execute(
                "DELETE FROM service_delivery WHERE definition_id = ?", (definition_id,)
            )
            self._conn.execute("DELETE FROM service_definition WHERE id = ?", (definition_id,))

    def deliveries(self) -> list[Delivery]:
        rows = self._conn.execute(
            f"SELECT {DELIVERY_COLUMNS} FROM service_delivery ORDER BY id"
        ).fetchall()
        return [delivery_from_row(row) for row in rows]

    def insert_delivery(self, delivery: Delivery) -> Delivery:
        with atomic(self._conn):
            return self._insert_delivery(delivery)

    def _insert_delivery(self, delivery: Delivery) -> Delivery:
        cur = self._conn.execute(
            f"INSERT INTO service_delivery ({DELIVERY_INSERT_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            delivery_insert_values(delivery),
        )
        assert cur.lastrowid is not None
        return dataclasses.replace(delivery, id=cur.lastrowid)

    def update_delivery(self, delivery: Delivery) -> None:
        with atomic(self._conn):
            self._conn.execute(
                "UPDATE service_delivery SET state = ?, attempts = ?, next_attempt_at = ?, "
                "last_status = ?, last_error = ?, finished_at = ? WHERE id = ?",
                delivery_update_values(delivery),
            )

    def update(self, entry: Entry) -> None:
        with atomic(self._conn):
            self._update(entry)

    def finish(self, entry: Entry, delivery: Delivery | None) -> Delivery | None:
        """The entry's new state and the run's delivery, in one transaction."""
        with atomic(self._conn):
            self._update(entry)
            return None if delivery is None else self._insert_delivery(delivery)

    def _update(self, entry: Entry) -> None:
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
            self._conn.execute("DELETE FROM service_delivery WHERE crawl_id = ?", (crawl_id,))
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

    async def insert(
        self,
        seeds: list[str],
        settings: dict[str, Any],
        now: float,
        definition_id: int | None = None,
    ) -> Entry:
        return await self._run(lambda: self._index.insert(seeds, settings, now, definition_id))

    async def definitions(self) -> list[Definition]:
        return await self._run(self._index.definitions)

    async def insert_definition(
        self, spec: dict[str, Any], now: float, next_run_at: float | None
    ) -> Definition:
        return await self._run(lambda: self._index.insert_definition(spec, now, next_run_at))

    async def update_definition(self, definition: Definition) -> None:
        snapshot = dataclasses.replace(definition)
        await self._run(lambda: self._index.update_definition(snapshot))

    async def delete_definition(self, definition_id: int) -> None:
        await self._run(lambda: self._index.delete_definition(definition_id))

    async def deliveries(self) -> list[Delivery]:
        return await self._run(self._index.deliveries)

    async def insert_delivery(self, delivery: Delivery) -> Delivery:
        return await self._run(lambda: self._index.insert_delivery(delivery))

    async def update_delivery(self, delivery: Delivery) -> None:
        snapshot = dataclasses.replace(delivery)
        await self._run(lambda: self._index.update_delivery(snapshot))

    async def update(self, entry: Entry) -> None:
        snapshot = dataclasses.replace(entry)  # the caller may change it meanwhile
        await self._run(lambda: self._index.update(snapshot))

    async def finish(self, entry: Entry, delivery: Delivery | None) -> Delivery | None:
        snapshot = dataclasses.replace(entry)
        return await self._run(lambda: self._index.finish(snapshot, delivery))

    async def delete(self, crawl_id: int) -> None:
        await self._run(lambda: self._index.delete(crawl_id))

    async def ping(self) -> None:
        await self._run(self._index.ping)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._index.close()


class SqliteServiceStore:
    """The service's storage in SQLite files under the data directory (module docstring)."""

    def __init__(self, data_dir: Path, index: AsyncIndex) -> None:
        self.data_dir = data_dir
        self.crawls_dir = data_dir / "crawls"
        self.definitions_dir = data_dir / "definitions"
        self._index = index
        self._definition_of: dict[int, int] = {}  # run -> its definition (shared file)

    @classmethod
    async def open(cls, data_dir: Path) -> SqliteServiceStore:
        for directory in (data_dir / "crawls", data_dir / "definitions"):
            await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
        store = cls(data_dir, await AsyncIndex.open(data_dir / "service.db"))
        await store.entries()  # learns which crawls are runs of a definition
        return store

    def describe(self) -> str:
        return str(self.data_dir)

    def path_of(self, crawl_id: int) -> Path:
        """The file holding the crawl: its definition's, or its own."""
        definition_id = self._definition_of.get(crawl_id)
        if definition_id is not None:
            return self.definition_path(definition_id)
        return self.crawls_dir / f"{crawl_id}.db"

    def definition_path(self, definition_id: int) -> Path:
        return self.definitions_dir / f"{definition_id}.db"

    def _shared(self, crawl_id: int) -> bool:
        return crawl_id in self._definition_of

    def _id_in_file(self, crawl_id: int) -> int | None:
        """The crawl's id inside its file: the service's in a shared file, else its one."""
        return crawl_id if self._shared(crawl_id) else None

    def _learn(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry.definition_id is not None:
                self._definition_of[entry.id] = entry.definition_id

    # -- the index ---------------------------------------------------------------

    async def entries(self) -> list[Entry]:
        entries = await self._index.entries()
        self._learn(entries)
        return entries

    async def insert(
        self,
        seeds: list[str],
        settings: dict[str, Any],
        now: float,
        definition_id: int | None = None,
    ) -> Entry:
        entry = await self._index.insert(seeds, settings, now, definition_id)
        self._learn([entry])
        return entry

    async def definitions(self) -> list[Definition]:
        return await self._index.definitions()

    async def insert_definition(
        self, spec: dict[str, Any], now: float, next_run_at: float | None
    ) -> Definition:
        return await self._index.insert_definition(spec, now, next_run_at)

    async def update_definition(self, definition: Definition) -> None:
        await self._index.update_definition(definition)

    async def delete_definition(self, definition_id: int) -> None:
        await self._index.delete_definition(definition_id)
        await asyncio.to_thread(remove_crawl_files, self.definition_path(definition_id))

    async def deliveries(self) -> list[Delivery]:
        return await self._index.deliveries()

    async def insert_delivery(self, delivery: Delivery) -> Delivery:
        return await self._index.insert_delivery(delivery)

    async def update_delivery(self, delivery: Delivery) -> None:
        await self._index.update_delivery(delivery)

    async def update(self, entry: Entry) -> None:
        await self._index.update(entry)

    async def finish(self, entry: Entry, delivery: Delivery | None) -> Delivery | None:
        return await self._index.finish(entry, delivery)

    async def mark_seeded(self, crawl_id: int, now: float) -> None:
        """Nothing to record: no other process joins a per-crawl file."""

    async def delete(self, crawl_id: int) -> None:
        """A one-off crawl's file is unlinked; a definition's run is deleted from the
        shared file in batches (module docstring)."""
        path = self.path_of(crawl_id)
        if self._shared(crawl_id):
            await asyncio.to_thread(crawl_delete.delete_crawl, path, crawl_id)
        else:
            await asyncio.to_thread(remove_crawl_files, path)
        await self._index.delete(crawl_id)
        self._definition_of.pop(crawl_id, None)

    async def ping(self) -> None:
        await self._index.ping()
        await asyncio.to_thread(_writable, self.crawls_dir)

    async def close(self) -> None:
        await asyncio.to_thread(self._index.close)

    # -- one crawl's file ------------------------------------------------------------

    def target(self, crawl_id: int) -> CrawlTarget:
        return CrawlTarget(self.path_of(crawl_id), self._id_in_file(crawl_id))

    async def prepare(self, crawl_id: int) -> int | None:
        if self._shared(crawl_id):
            return await asyncio.to_thread(_prepare_shared, self.path_of(crawl_id), crawl_id)
        return await asyncio.to_thread(_prepare, self.path_of(crawl_id))

    async def snapshot(self, crawl_id: int) -> Snapshot | None:
        return await self._read(crawl_id, reads.snapshot)

    async def host_totals(self, crawl_id: int) -> dict[str, tuple[int, int]]:
        return await self._read(crawl_id, reads.host_totals) or {}

    async def crawl_stats(self, crawl_id: int) -> CrawlStats | None:
        return await self._read(crawl_id, reads.crawl_stats)

    async def workers(self, crawl_id: int) -> list[WorkerRow]:
        path = self.path_of(crawl_id)
        if not path.exists():
            return []
        return await asyncio.to_thread(reads.workers, path, self._id_in_file(crawl_id))

    async def load_report(self, crawl_id: int, fmt: str) -> ReportData | None:
        return await self._read(crawl_id, reads.load_report, fmt)

    async def _read(self, crawl_id: int, read: Callable[..., T], *args: Any) -> T | None:
        """``read(path, *args, id in the file)`` off the loop; None while the crawl has no
        row yet (its file not created, or a shared file without this run). A corrupt or
        foreign file (a StoreError, also a UsageError) is raised: the caller's 500."""
        path = self.path_of(crawl_id)
        if not path.exists():
            return None
        try:
            return await asyncio.to_thread(read, path, *args, self._id_in_file(crawl_id))
        except StoreError:
            raise
        except UsageError:
            return None

    async def load_diff(self, from_crawl: int, to_crawl: int) -> CrawlDiff | None:
        """Two runs of one definition compared in their shared file; None while either
        has no crawl row (or they are not runs of one definition)."""
        definition_id = self._definition_of.get(to_crawl)
        if definition_id is None or self._definition_of.get(from_crawl) != definition_id:
            return None
        path = self.definition_path(definition_id)
        if not path.exists():
            return None
        try:
            return await asyncio.to_thread(reads.load_diff, path, from_crawl, to_crawl)
        except StoreError:
            raise
        except UsageError:  # not recorded yet
            return None


def crawl_files(path: Path) -> list[Path]:
    """The database and its WAL and shared-memory files."""
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def remove_crawl_files(path: Path) -> None:
    for file in crawl_files(path):
        with contextlib.suppress(FileNotFoundError):
            file.unlink()


def _prepare(path: Path) -> int | None:
    """Resume the crawl in ``path`` (its leases, all a dead process's: no other process
    works on a service's crawl file), or start afresh (None) when a kill left it
    half-created: no crawl row, or a crawl whose seeds never reached the frontier."""
    if not path.exists():
        return None
    conn = db.open_database(path)
    try:
        record = crawls.get(conn)
        counts = Frontier(conn, record.id).counts()
    except UsageError:  # killed after creating the file, before recording the crawl
        counts = None
    finally:
        conn.close()
    if counts is not None and counts.pending + counts.leased + counts.done > 0:
        return counts.leased
    remove_crawl_files(path)
    return None


def _prepare_shared(path: Path, crawl_id: int) -> int | None:
    """``_prepare`` for a run in its definition's file: resume it, or remove what a kill
    left of it (a crawl row whose seeds never reached the frontier), not the file."""
    if not path.exists():
        return None
    conn = db.open_database(path)
    try:
        try:
            crawls.get(conn, crawl_id)
        except UsageError:  # killed before the crawl was recorded
            return None
        counts = Frontier(conn, crawl_id).counts()
        if counts.pending + counts.leased + counts.done > 0:
            return counts.leased
        crawl_delete.delete_rows(conn, crawl_id)
        return None
    finally:
        conn.close()


def _writable(directory: Path) -> None:
    """OSError when nothing can be written to ``directory``."""
    with tempfile.NamedTemporaryFile(dir=directory, prefix=".ready-"):
        pass


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
