"""The contract suite's one fixture: ``db``, a fresh database on each backend in turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from backends import Backend, PostgresBackend, SqliteBackend

from kit.pgkit import BACKENDS, create_database, drop_database, require_postgres


@pytest.fixture(params=BACKENDS)
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """A fresh SQLite file or PostgreSQL database; every contract test runs on both."""
    backend: Backend
    url = None
    if request.param == "sqlite":
        backend = SqliteBackend(tmp_path / "crawl.db")
    else:
        require_postgres()
        url = create_database()
        backend = PostgresBackend(url)
    try:
        yield backend
    finally:
        await backend.close()
        if url is not None:
            drop_database(url)
