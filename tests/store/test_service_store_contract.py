"""The service's store on both backends: a run's end and its webhook delivery are one
transaction, and a run's deliveries go with it (``crawler.store.service``)."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from backends import PostgresBackend, SqliteBackend

from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.store.service import Delivery, ServiceStore, open_service_store

from kit.crawlkit import CRAWL_BOUND_S, comparable
from kit.pgkit import BACKENDS, create_database, drop_database, require_postgres
from kit.sitekit import Page, Site

SEED = "http://127.0.0.1:9/"  # never connected to: rows only


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ServiceStore]:
    url = None
    if request.param != "sqlite":
        require_postgres()
        url = create_database()
    opened = await open_service_store(url, tmp_path / "data")
    try:
        yield opened
    finally:
        await opened.close()
        if url is not None:
            drop_database(url)


def _delivery(crawl_id: int, **changes: Any) -> Delivery:
    delivery = Delivery(0, 1, crawl_id, "http://127.0.0.1:9/hook", b"{}", "pending", 0, 5.0, 5.0)
    return dataclasses.replace(delivery, **changes)


async def _running_run(store: ServiceStore) -> Any:
    entry = await store.insert([SEED], {}, 1.0, definition_id=1)
    entry.state, entry.started_at = "running", 2.0
    await store.update(entry)
    return entry


async def test_finish_records_the_end_and_the_delivery_together(store: ServiceStore) -> None:
    entry = await _running_run(store)
    entry.state, entry.finished_at = "finished", 3.0
    recorded = await store.finish(entry, _delivery(entry.id))
    assert recorded is not None
    assert recorded.id > 0
    assert await store.deliveries() == [recorded]
    (stored,) = await store.entries()
    assert (stored.state, stored.finished_at) == ("finished", 3.0)


async def test_finish_without_a_delivery_records_the_end_only(store: ServiceStore) -> None:
    entry = await _running_run(store)
    entry.state, entry.error = "failed", "boom"
    assert await store.finish(entry, None) is None
    (stored,) = await store.entries()
    assert (stored.state, stored.error) == ("failed", "boom")
    assert await store.deliveries() == []


async def test_a_delivery_that_cannot_be_recorded_leaves_the_run_unfinished(
    store: ServiceStore,
) -> None:
    entry = await _running_run(store)
    entry.state, entry.finished_at = "finished", 3.0
    broken = _delivery(entry.id, url=None)  # NOT NULL: the insert fails
    with pytest.raises(Exception):  # noqa: B017, PT011 - each driver's own error
        await store.finish(entry, broken)
    (stored,) = await store.entries()
    assert (stored.state, stored.finished_at) == ("running", None)
    assert await store.deliveries() == []


async def test_deleting_a_run_deletes_its_deliveries_only(store: ServiceStore) -> None:
    older, newer = await _running_run(store), await _running_run(store)
    for entry in (older, newer):
        entry.state = "finished"
        await store.finish(entry, _delivery(entry.id))
    await store.delete(older.id)
    assert [e.id for e in await store.entries()] == [newer.id]
    assert [d.crawl_id for d in await store.deliveries()] == [newer.id]


# Tables whose rows are keyed by a URL of the crawl (``url_id``), and the link tables.
_URL_KEYED = ("result", "anchor", "page_validator", "render_issue")
_LINK_TABLES = ("link_open", "link_fresh", "link_settled")


def _ring_site() -> Site:
    """Pages in a ring, each linking to the next three, to an anchor and to a missing page."""
    site: Site = {"/": Page(links=["/p/0#top"])}
    for i in range(40):
        links = [f"/p/{(i + k) % 40}" for k in range(1, 4)]
        site[f"/p/{i}"] = Page(links=[*links, f"/p/{(i + 1) % 40}#a{i}", f"/gone/{i % 3}"])
    return site


async def _orphans(db: Any) -> dict[str, int]:
    """Rows of every URL-keyed table, and link ends, whose URL is not in ``url``."""
    found = {}
    for table in _URL_KEYED:
        sql = f"SELECT count(*) FROM {table} WHERE url_id NOT IN (SELECT id FROM url)"
        found[table] = (await db.fetch(sql))[0][0]
    for table in _LINK_TABLES:
        for end in ("source_id", "target_id"):
            sql = f"SELECT count(*) FROM {table} WHERE {end} NOT IN (SELECT id FROM url)"
            found[f"{table}.{end}"] = (await db.fetch(sql))[0][0]
    return found


async def test_a_deleted_run_leaves_no_row_keyed_by_its_urls(
    store: ServiceStore, site_server: Any
) -> None:
    """Two runs of one definition crawled for real into its storage; the first is
    deleted: no row of any table keyed by its URLs stays (results, anchors,
    validators, rendered pages' issues, links), the second's report is as before."""
    site = await site_server(_ring_site())
    seeds = [site.url("/")]
    runs = [await store.insert(seeds, {}, 1.0, definition_id=1) for _ in range(2)]
    for run in runs:
        target = store.target(run.id)
        settings = CrawlSettings(max_retries=0, include_fragments=True)
        job = runner.start(target.db, seeds, settings, crawl_id=target.crawl_id)
        try:
            assert await asyncio.wait_for(job.run(), CRAWL_BOUND_S)
        finally:
            job.close()
    gone, kept = store.target(runs[0].id), store.target(runs[1].id)
    assert gone.db == kept.db  # one definition's runs share their storage
    db = SqliteBackend(Path(gone.db)) if isinstance(gone.db, Path) else PostgresBackend(gone.db)
    try:
        # As a rendered page leaves it (--render); a validator as a server's ETag would.
        in_gone = "(SELECT min(id) FROM url WHERE crawl_id = ? AND kind = 3)"
        await db.execute(
            f"INSERT INTO render_issue (url_id, seq, kind, message) "
            f"VALUES ({in_gone}, 0, 'script_error', 'm')",
            gone.crawl_id,
        )
        await db.execute(
            f"INSERT INTO page_validator (url_id, etag) VALUES ({in_gone}, 'e')", gone.crawl_id
        )
        for table in ("anchor", "result", "page_validator", "render_issue"):
            sql = (f"SELECT count(*) FROM {table} t JOIN url u ON u.id = t.url_id "
                   "WHERE u.crawl_id = ?")  # fmt: skip
            assert (await db.fetch(sql, gone.crawl_id))[0][0] > 0, table
        before = await store.load_report(runs[1].id, "json")
        assert before is not None
        assert before.broken

        await store.delete(runs[0].id)

        orphans = await _orphans(db)
        assert orphans == dict.fromkeys(orphans, 0)  # names the table that kept rows
        sql = "SELECT count(*) FROM url WHERE crawl_id = ?"
        assert (await db.fetch(sql, gone.crawl_id))[0][0] == 0
        assert (await db.fetch(sql, kept.crawl_id))[0][0] > 0
        after = await store.load_report(runs[1].id, "json")
        assert after is not None
        assert comparable(after) == comparable(before)
    finally:
        await db.close()


async def test_a_version_2_index_drops_the_deliveries_of_runs_deleted_before(
    tmp_path: Path,
) -> None:
    """SQLite's index upgrade (PostgreSQL's is migration 0019): versions before 3 left a
    retired run's deliveries behind."""
    data = tmp_path / "data"
    store = await open_service_store(None, data)
    try:
        kept = await _running_run(store)
        kept.state = "finished"
        await store.finish(kept, _delivery(kept.id))
        await store.insert_delivery(_delivery(kept.id + 100))  # its run is long gone
        assert len(await store.deliveries()) == 2
    finally:
        await store.close()
    with sqlite3.connect(data / "service.db") as conn:
        conn.execute("PRAGMA user_version = 2")
    conn.close()
    store = await open_service_store(None, data)
    try:
        assert [d.crawl_id for d in await store.deliveries()] == [kept.id]
    finally:
        await store.close()
