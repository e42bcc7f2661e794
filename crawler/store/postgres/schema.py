"""Connecting to PostgreSQL, the numbered migrations, and the one transaction helper.

Migrations are ``migrations/postgresql/NNNN_description.sql``, numbered and
append-only like the SQLite ones, and applied the same way: every file newer
than the database, in order, in one transaction, each recorded in
``_migrations``. Workers starting together take an advisory lock, so the
schema is created once. A database whose ``_migrations`` names a version this
code does not know is refused, as is one with crawler-like tables but no
``_migrations`` (not ours).
"""

from __future__ import annotations

import asyncio
import random
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

from crawler.config import Durability
from crawler.errors import DatabaseFailedError, DiskFullError, ForeignDatabaseError, StoreError
from crawler.store import migrate

DIALECT = "postgresql"
POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 8
CONNECT_TIMEOUT_S = 10.0
# Concurrent transactions that insert the same URLs can deadlock; PostgreSQL
# aborts one of them, which is then simply run again.
TRANSACTION_RETRIES = 8
RETRY_BASE_S = 0.005
_MIGRATION_LOCK = 0x43524C57  # "CRLW", as the SQLite application id
_RETRYABLE = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)

T = TypeVar("T")


def redact(dsn: str) -> str:
    """The URL without its password, for messages."""
    parts = urllib.parse.urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def server_settings(durability: Durability) -> dict[str, str]:
    """Session settings of the store's connections.

    - ``jit = off``: the crawl's statements are short and run thousands of
      times; compiling one costs more than it saves (a report's too).
    - ``synchronous_commit = off`` under ``--durability normal``: a commit
      returns before the server has flushed its WAL (which it does within
      ``wal_writer_delay``), as SQLite's ``synchronous = NORMAL``: a crawler
      process killed loses nothing it committed; a server crash or power loss
      may lose the last commits, never consistency, and ``resume`` fetches
      those URLs again. ``full`` keeps the server's setting (on by default).
    """
    settings = {"jit": "off"}
    if durability == "normal":
        settings["synchronous_commit"] = "off"
    return settings


async def _no_reset(conn: asyncpg.Connection) -> None:
    """Given back to the pool: no session state to reset (asyncpg's reset is a round trip).

    The store sets nothing per session (``SET LOCAL`` and transaction-level
    advisory locks end with their transaction); only a transaction left open
    by a cancelled call is rolled back.
    """
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def create_pool(
    dsn: str, *, max_size: int = POOL_MAX_SIZE, durability: Durability = "full"
) -> asyncpg.Pool:
    """A connection pool on ``dsn`` with the schema brought up to date."""
    try:
        pool = await asyncpg.create_pool(
            dsn,
            min_size=POOL_MIN_SIZE,
            max_size=max_size,
            timeout=CONNECT_TIMEOUT_S,
            command_timeout=None,
            server_settings=server_settings(durability),
            reset=_no_reset,
        )
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        raise StoreError(f"cannot connect to {redact(dsn)}: {exc}") from exc
    try:
        async with pool.acquire() as conn:
            await apply_migrations(conn)
    except BaseException:
        await pool.close()
        raise
    return pool


async def apply_migrations(conn: asyncpg.Connection) -> int:
    """Apply every migration newer than the database; return the resulting version."""
    files = migrate.available(DIALECT)
    latest = files[-1][0] if files else 0
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        if not await conn.fetchval("SELECT to_regclass('_migrations') IS NOT NULL"):
            if await conn.fetchval(
                "SELECT to_regclass('url') IS NOT NULL OR to_regclass('crawl') IS NOT NULL"
            ):
                raise ForeignDatabaseError(
                    "this PostgreSQL database has tables named like ours but is not a "
                    "crawler database; use an empty database"
                )
            await conn.execute(
                "CREATE TABLE _migrations (version integer PRIMARY KEY, name text NOT NULL, "
                "applied_at double precision NOT NULL)"
            )
        current = await conn.fetchval("SELECT COALESCE(max(version), 0) FROM _migrations")
        if current > latest:
            raise ForeignDatabaseError(
                f"made by a newer crawler (schema {current}, this one knows {latest})"
            )
        for version, name, path in files:
            if version <= current:
                continue
            await conn.execute(path.read_text(encoding="utf-8"))
            await conn.execute(
                "INSERT INTO _migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                version,
                name,
                time.time(),
            )
    return int(max(current, latest))


async def in_transaction(
    pool: asyncpg.Pool,
    body: Callable[[asyncpg.Connection], Awaitable[T]],
    *,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """Run ``body`` in one transaction; run it again if PostgreSQL aborted it for a deadlock.

    ``on_retry`` is called after each rollback, so caches holding what the
    rolled-back transaction wrote can be dropped.
    """
    for attempt in range(TRANSACTION_RETRIES + 1):
        try:
            async with pool.acquire() as conn, conn.transaction():
                return await body(conn)
        except _RETRYABLE:
            if on_retry is not None:
                on_retry()
            if attempt == TRANSACTION_RETRIES:
                raise
            await asyncio.sleep(RETRY_BASE_S * (2**attempt) * random.uniform(0.5, 1.5))
        except asyncpg.DiskFullError as exc:
            if on_retry is not None:
                on_retry()
            raise DiskFullError(f"PostgreSQL: disk full ({exc})") from exc
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            if on_retry is not None:
                on_retry()
            raise DatabaseFailedError(f"PostgreSQL: {exc}") from exc
        except BaseException:
            if on_retry is not None:
                on_retry()
            raise
    raise AssertionError("unreachable")


async def connect_reader(dsn: str) -> Any:
    """One connection for reading reports; refuses a database that is not a crawler's."""
    try:
        # jit off as on the store's connections: compiling a report's plans
        # (their costs are estimated high) took longer than running them.
        conn = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S, server_settings={"jit": "off"})
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        raise StoreError(f"cannot connect to {redact(dsn)}: {exc}") from exc
    try:
        if not await conn.fetchval("SELECT to_regclass('_migrations') IS NOT NULL"):
            raise ForeignDatabaseError(f"{redact(dsn)}: not a crawler database (no crawl yet?)")
        current = await conn.fetchval("SELECT COALESCE(max(version), 0) FROM _migrations")
        latest = migrate.latest_version(DIALECT)
        if current > latest:
            raise ForeignDatabaseError(
                f"{redact(dsn)}: made by a newer crawler "
                f"(schema {current}, this one knows {latest})"
            )
    except BaseException:
        await conn.close()
        raise
    return conn
