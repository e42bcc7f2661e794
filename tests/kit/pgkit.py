"""PostgreSQL for tests: a fresh database per test, and crawls on either backend.

``pg_url`` creates ``crawler_test_<random>`` on the server named by
``PGTEST_ADMIN_URL`` (default: postgres on 127.0.0.1:5432, trust auth), yields
its URL, and drops it at teardown. When the server cannot be reached the test
is skipped with the reason, except under CI (``CI=true``), where it fails:
``.ci/run`` starts PostgreSQL, so a missing server there is a broken setup.

``any_db`` is parametrized over both backends: a SQLite path, or a PostgreSQL
URL; ``crawlkit.crawl`` and ``crawlkit.read_report`` take either.

tests/conftest.py registers this module as a plugin, so every test module
can ask for ``any_db`` and ``pg_url`` by name.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sqlite3
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest

from crawler.store import open as store_open

T = TypeVar("T")
ADMIN_URL = os.environ.get("PGTEST_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
CONNECT_TIMEOUT_S = 5.0
BACKENDS = ("sqlite", "postgresql")

_reachable: str | None = None  # None: not tried yet; "": reachable; else why not


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to the end from synchronous code, inside a test's loop or not."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def database_url(name: str) -> str:
    """The URL of database ``name`` on the admin URL's server."""
    return ADMIN_URL.rsplit("/", 1)[0] + "/" + name


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(ADMIN_URL, timeout=CONNECT_TIMEOUT_S)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _check_reachable() -> str:
    global _reachable
    if _reachable is None:
        try:
            run_async(_admin("SELECT 1"))
            _reachable = ""
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            _reachable = f"PostgreSQL is not reachable at {ADMIN_URL}: {exc}"
    return _reachable


def require_postgres() -> None:
    """Skip (fail under CI) when the test server is not there."""
    why = _check_reachable()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why} (under CI, .ci/postgres.sh should have started it)")
        pytest.skip(f"{why}; start it with `bash .ci/postgres.sh`")


def create_database() -> str:
    """A new empty database; returns its URL."""
    name = f"crawler_test_{uuid.uuid4().hex[:12]}"
    run_async(_admin(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8'"))
    return database_url(name)


def drop_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    run_async(_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test, dropped afterwards."""
    require_postgres()
    url = create_database()
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture(params=BACKENDS)
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file path, or a fresh PostgreSQL database URL: the test runs on both."""
    if request.param == "sqlite":
        yield str(tmp_path / "c.db")
        return
    require_postgres()
    url = create_database()
    try:
        yield url
    finally:
        drop_database(url)


def done_urls(db: str | Path) -> set[str]:
    """URLs whose result is committed (state done), on either backend (crash tests)."""
    sql = "SELECT url FROM url WHERE state = 2"
    if not store_open.is_postgres_url(str(db)):
        conn = sqlite3.connect(db)
        try:
            return {url for (url,) in conn.execute(sql)}
        finally:
            conn.close()

    async def read() -> set[str]:
        pg = await asyncpg.connect(str(db))
        try:
            return {r[0] for r in await pg.fetch(sql)}
        finally:
            await pg.close()

    return run_async(read())


def integrity(db: str | Path) -> str:
    """``PRAGMA integrity_check`` for SQLite; PostgreSQL has no such check: "ok"."""
    if store_open.is_postgres_url(str(db)):
        return "ok"
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()
