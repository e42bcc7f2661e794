"""Opening a crawl database: identity checks, pragmas, and the one transaction helper.

A file we did not create is refused before anything is written to it: the
checks run on a read-only connection, so a foreign or corrupt file is left
byte-for-byte untouched.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from crawler.config import Durability
from crawler.errors import DatabaseFailedError, DiskFullError, ForeignDatabaseError, StoreError
from crawler.store import migrate

APPLICATION_ID = 0x43524C57  # "CRLW": marks a file as a crawler database
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 30_000
# Writers wait for the write lock themselves (``_begin``): SQLite's own busy
# handler sleeps 25-100 ms per try once it has waited a little, which wastes
# most of the time a lock held for a few milliseconds is free.
WRITER_BUSY_TIMEOUT_MS = 10
LOCK_WAIT_S = 30.0
LOCK_POLL_S = 0.0005
# Checkpoint after this much WAL, not SQLite's 4 MB: a page dirtied by many
# commits is copied back once per checkpoint, and each checkpoint waits for
# two fsyncs. Early in a large crawl most commits insert new URLs at random
# leaves of the URL key's index; the longer the interval, the more of those
# leaves a checkpoint copies once for several commits (bytes written a page,
# by interval: bench/RESULTS.md, "Session 34"). The file keeps its size after
# a checkpoint and goes when the last connection closes.
AUTOCHECKPOINT_BYTES = 64 * 1024 * 1024
# A commit writes every B-tree page it changed, whole, to the WAL (and the
# checkpoint again to the file). Most of a crawl's writes are single rows at
# random places of the URL key's index, so a smaller page writes fewer bytes
# per row (bench/RESULTS.md, "Session 15"). 1 KB still holds an index key of
# about 230 bytes without an overflow page; a longer URL costs its lookups
# one more page read, not a wrong answer.
PAGE_SIZE_BYTES = 1024
TEMP_CACHE_KIB = 16_000  # the temporary tables' page cache (_configure)


def open_database(path: str | Path, *, durability: Durability = "normal") -> sqlite3.Connection:
    """Open (creating if needed) a crawl database and bring its schema up to date."""
    path = Path(path)
    _check_identity(path)
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open database {path}: {exc}") from exc
    try:
        _configure(conn, durability)
        migrate.apply(conn, APPLICATION_ID)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _classify(exc, path) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def open_reader(path: str | Path) -> sqlite3.Connection:
    """A read-only connection for reports: it never blocks the writer."""
    path = Path(path)
    if not path.exists():
        raise ForeignDatabaseError(f"{path}: no such database")
    _check_identity(path)
    conn = sqlite3.connect(_read_only_uri(path), uri=True, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def file_of(conn: sqlite3.Connection) -> str:
    """The file a connection has open (its main database)."""
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return str(file)
    raise ForeignDatabaseError("no main database on this connection")


def _configure(conn: sqlite3.Connection, durability: Durability) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # Only a new, empty file takes it (before WAL mode); older files keep theirs.
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE_BYTES}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA busy_timeout = {WRITER_BUSY_TIMEOUT_MS}")
    conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    conn.execute("PRAGMA foreign_keys = ON")
    # A reader holding an old snapshot stops checkpoints from resetting the
    # WAL; the engine watches for that (frontier.bound_wal).
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_BYTES // page_size}")
    # 8 MB of page cache: the OS keeps the file cached anyway, and memory per
    # process stays flat (several workers share the machine).
    conn.execute("PRAGMA cache_size = -8000")
    # The writer's temporary tables (a re-crawl's map of the previous crawl's
    # targets, crawler/store/sqlite/recorded.py) live in a file of their own,
    # with 2 MB of cache by default: past that, every batch of 304 pages read
    # and wrote that file. TEMP_CACHE_KIB holds a 100,000-page site's map; a
    # larger one spills to the file, so memory stays bounded.
    conn.execute(f"PRAGMA temp.cache_size = -{TEMP_CACHE_KIB}")


def _check_identity(path: Path) -> None:
    """Refuse a file that is not SQLite, not ours, or from a newer schema."""
    if not path.exists():
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise ForeignDatabaseError(f"{path}: directory {parent} does not exist")
        if not os.access(parent, os.W_OK):
            raise ForeignDatabaseError(f"{path}: directory {parent} is not writable")
        return
    if path.is_dir():
        raise ForeignDatabaseError(f"{path}: is a directory, not a database file")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise ForeignDatabaseError(f"{path}: cannot read: {exc.strerror}") from exc
    if header == b"":
        return  # an empty file is a new database
    if header != SQLITE_HEADER:
        raise ForeignDatabaseError(f"{path}: not a SQLite database")
    try:
        conn = sqlite3.connect(_read_only_uri(path), uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise ForeignDatabaseError(f"{path}: cannot open: {exc}") from exc
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise ForeignDatabaseError(f"{path}: damaged or not a database ({exc})") from exc
    finally:
        conn.close()
    if app_id != APPLICATION_ID and tables:
        raise ForeignDatabaseError(f"{path}: a SQLite database, but not a crawler database")
    latest = migrate.latest_version()
    if version > latest:
        raise ForeignDatabaseError(
            f"{path}: made by a newer crawler (schema {version}, this one knows {latest})"
        )


def _read_only_uri(path: Path) -> str:
    """A read-only URI; '#', '?' and '%' in a file name must be percent-encoded."""
    return f"file:{urllib.parse.quote(str(path))}?mode=ro"


def _classify(exc: sqlite3.DatabaseError, path: Path) -> StoreError:
    if is_disk_full(exc):
        return DiskFullError(f"{path}: disk full ({exc})")
    return ForeignDatabaseError(f"{path}: damaged or not a database ({exc})")


def _begin(conn: sqlite3.Connection) -> None:
    """BEGIN IMMEDIATE, polling for the write lock another process holds."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if is_disk_full(exc):
                raise DiskFullError(str(exc)) from exc
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise StoreError(f"the database stayed locked for {LOCK_WAIT_S:.0f} s") from exc
        time.sleep(LOCK_POLL_S * (1 + random.random()))


def is_disk_full(exc: BaseException) -> bool:
    """SQLite's SQLITE_FULL, from a full disk or from max_page_count."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code == sqlite3.SQLITE_FULL or "database or disk is full" in str(exc)


@contextlib.contextmanager
def atomic(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, begun IMMEDIATE so it never fails half-way on the lock."""
    _begin(conn)
    try:
        yield conn
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise translate(exc) from exc
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise translate(exc) from exc


def translate(exc: sqlite3.Error) -> StoreError:
    """The store's error for a driver error: nothing above ``store/`` sees ``sqlite3``."""
    if is_disk_full(exc):
        return DiskFullError(f"disk full: {exc}")
    return DatabaseFailedError(f"database error: {exc}")
