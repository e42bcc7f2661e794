"""Recording a crawl and its seeds is one transaction, on both backends.

A crawl recorded without its seeds reads as finished (nothing pending, nothing
leased), so a crash between the two used to end in "exit 0, 0 pages". Here:
the row and the seeds appear together or not at all; a crawl waiting for its
sitemaps is not seeded until ``mark_seeded``; and a crawl an older version
recorded without seeds gets them from its next run (the migration leaves it
unseeded; the run enqueues the recorded seeds, idempotently).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator

import asyncpg
import pytest

from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.models import Discovered
from crawler.scope import Scope
from crawler.store import migrate
from crawler.store import open as store_open
from crawler.store.contract import FrontierStore
from crawler.store.postgres import complete as pg_complete
from crawler.store.sqlite import frontier as sqlite_frontier
from crawler.store.sqlite.db import APPLICATION_ID

from kit.crawlkit import CRAWL_BOUND_S, read_report
from kit.pgkit import run_async
from kit.sitekit import Page

T0 = 1_700_000_000.0
# The last schema before crawl.seeded_at (sqlite 0010, postgresql 0011).
OLD_SCHEMA = {"sqlite": 6, "postgresql": 4}


def seeds_of(settings: CrawlSettings, urls: list[str]) -> list[Discovered]:
    keys = runner.normalize_seeds(urls)
    return runner.classified_seeds(Scope.build(settings, keys), keys)


def create(db: str, urls: list[str], *, seeded: bool = True) -> FrontierStore:
    settings = CrawlSettings()
    return store_open.create_crawl(
        db, urls, settings, seeds=seeds_of(settings, urls), seeded=seeded
    )


@pytest.fixture
def store_of() -> Iterator[list[FrontierStore]]:
    """Stores the test opened, closed at teardown."""
    stores: list[FrontierStore] = []
    yield stores
    for store in stores:
        store.close()


def crawl_rows(db: str) -> int:
    if store_open.is_postgres_url(db):

        async def count() -> int:
            conn = await asyncpg.connect(db)
            try:
                return int(await conn.fetchval("SELECT count(*) FROM crawl"))
            finally:
                await conn.close()

        return run_async(count())
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM crawl").fetchone()[0])
    finally:
        conn.close()


async def test_a_new_crawl_holds_its_seeds_at_once(any_db: str, store_of) -> None:
    urls = ["http://a.test/", "http://b.test/x", "http://a.test/"]
    store = create(any_db, urls)
    store_of.append(store)
    counts = await store.counts()
    assert (counts.pending, counts.leased, counts.done) == (2, 0, 0)
    assert await store.is_seeded()
    assert not await store.finish_if_quiescent(T0)  # work is there: not finished
    again, record = store_open.open_crawl(any_db, store.crawl_id)
    store_of.append(again)
    assert record.seeds == urls  # as the user gave them


async def test_recording_fails_whole_when_the_seeds_fail(
    any_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while enqueuing the seeds leaves no crawl row behind."""

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected: the seeds could not be written")

    if store_open.is_postgres_url(any_db):
        monkeypatch.setattr(pg_complete, "enqueue", fail)
    else:
        monkeypatch.setattr(sqlite_frontier.Frontier, "add_seeds", fail)
    with pytest.raises(RuntimeError, match="injected"):
        create(any_db, ["http://a.test/"])
    assert crawl_rows(any_db) == 0


async def test_a_crawl_with_sitemaps_is_seeded_only_when_marked(any_db: str, store_of) -> None:
    store = create(any_db, ["http://a.test/"], seeded=False)
    store_of.append(store)
    assert not await store.is_seeded()
    # Enqueuing the seeds again, as a run does before collecting sitemaps, adds nothing.
    assert await store.enqueue(seeds_of(CrawlSettings(), ["http://a.test/"]), T0) == 0
    assert (await store.counts()).pending == 1
    await store.mark_seeded(T0)
    await store.mark_seeded(T0 + 5)  # idempotent
    assert await store.is_seeded()


async def test_a_second_crawl_is_seeded_on_its_own(any_db: str, store_of) -> None:
    first = create(any_db, ["http://a.test/"])
    second = create(any_db, ["http://a.test/"], seeded=False)
    store_of.extend([first, second])
    assert await first.is_seeded()
    assert not await second.is_seeded()
    assert (await second.counts()).pending == 1  # the same URL, a row of its own


# -- a crawl recorded by an older version -------------------------------------


def old_database_with_crawl(db: str, seeds: list[str], state: str = "running") -> None:
    """The schema before ``seeded_at``, holding a crawl recorded without its seeds."""
    config = json.dumps(CrawlSettings(max_retries=0).model_dump(), sort_keys=True)
    if store_open.is_postgres_url(db):
        run_async(_old_postgres(db, seeds, config, state))
        return
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for version, _, path in migrate.available("sqlite"):
            if version > OLD_SCHEMA["sqlite"]:
                break
            conn.executescript(path.read_text(encoding="utf-8"))
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute(
            "INSERT INTO crawl (seeds, config, state, started_at) VALUES (?, ?, ?, ?)",
            (json.dumps(seeds), config, state, T0),
        )
    finally:
        conn.close()


async def _old_postgres(url: str, seeds: list[str], config: str, state: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "CREATE TABLE _migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at double precision NOT NULL)"
        )
        for version, name, path in migrate.available("postgresql"):
            if version > OLD_SCHEMA["postgresql"]:
                break
            await conn.execute(path.read_text(encoding="utf-8"))
            await conn.execute("INSERT INTO _migrations VALUES ($1, $2, $3)", version, name, T0)
        await conn.execute(
            "INSERT INTO crawl (seeds, config, state, started_at) "
            "VALUES ($1::jsonb, $2::jsonb, $3, $4)",
            json.dumps(seeds),
            config,
            state,
            T0,
        )
    finally:
        await conn.close()


async def test_migration_leaves_an_old_crawl_without_seeds_unseeded(any_db: str, store_of) -> None:
    old_database_with_crawl(any_db, ["http://a.test/"])
    store, record = store_open.open_crawl(any_db)
    store_of.append(store)
    assert record.state == "running"
    assert not await store.is_seeded()
    assert (await store.counts()).pending == 0


@pytest.mark.parametrize("state", ["running", "finished"])
async def test_resume_of_an_old_crawl_without_seeds_crawls_them(
    any_db: str, site_server, state: str
) -> None:
    """What an older version left after the crash window: resume crawls the whole site.

    "finished" is what that version's resume made of it (exit 0, 0 pages).
    """
    server = await site_server({"/": Page(links=["/a", "/gone"]), "/a": Page()})
    old_database_with_crawl(any_db, [server.url("/")], state)
    for _ in range(2):  # the second resume finds the crawl finished and requests nothing
        job, _ = runner.open_existing(any_db)
        try:
            assert await asyncio.wait_for(job.run(), CRAWL_BOUND_S) is True
        finally:
            job.close()
    data = read_report(any_db)
    assert data.crawl.state == "finished"
    assert (data.summary.pages, data.summary.broken) == (2, 1)
    assert max(server.paths_requested().values()) == 1
