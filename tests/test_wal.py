"""The WAL stays bounded while a long read transaction runs beside the crawl."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.store.sqlite import store as sqlite_store

from kit.sitekit import Page, wait_until

LIMIT = 256 * 1024
# The check runs before each group commit, so one commit may pass the limit.
SLACK = 4 * 1024 * 1024


def _site(pages: int) -> dict[str, Page]:
    site = {"/": Page(links=[f"/p{i}" for i in range(pages)])}
    for i in range(pages):
        site[f"/p{i}"] = Page(
            links=[f"/p{(i * 7 + j) % pages}" for j in range(1, 6)] + [f"/missing{i}"]
        )
    return site


async def test_wal_bounded_while_a_reader_holds_a_snapshot(
    site_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "WAL_LIMIT_BYTES", LIMIT)
    monkeypatch.setattr(sqlite_store, "WAL_CHECK_EVERY_S", 0.0)
    server = await site_server(_site(1500))
    db_path = tmp_path / "c.db"
    job = runner.start(db_path, [server.url("/")], CrawlSettings(max_retries=0, robots=False))
    reader = sqlite3.connect(db_path, isolation_level=None)
    wal = Path(f"{db_path}-wal")
    biggest = 0

    def wal_size() -> int:
        nonlocal biggest
        size = wal.stat().st_size if wal.exists() else 0
        biggest = max(biggest, size)
        return size

    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM url").fetchone()  # the snapshot is now held
        task = asyncio.create_task(job.run())
        await wait_until(
            lambda: (
                isinstance(job.frontier, sqlite_store.AsyncFrontier) and job.frontier.wal_stalls > 0
            ),
            timeout=30,
            message="the crawl never waited for the reader",
        )
        for _ in range(20):  # the crawl stays stalled, the WAL stays bounded
            assert wal_size() <= LIMIT + SLACK
            await asyncio.sleep(0.01)
        reader.execute("COMMIT")
        assert await asyncio.wait_for(task, 60)
    finally:
        reader.close()
        job.close()
    assert biggest <= LIMIT + SLACK
    conn = sqlite3.connect(db_path)
    try:
        done = conn.execute("SELECT count(*) FROM url WHERE state = 2").fetchone()[0]
        assert done == 3001  # every page and every missing page: nothing lost
    finally:
        conn.close()
