"""The PostgreSQL service store and crawl queue, without a service process.

Which crawls a ``crawler work --service`` process may join (running, seeded,
not finished; the least staffed first), and what ``prepare`` does with a
crawl a kill left without seeds.
"""

from __future__ import annotations

import asyncio

from crawler.config import CrawlSettings
from crawler.models import Discovered, UrlKind
from crawler.store import open as store_open
from crawler.store.postgres.service_store import PostgresCrawlQueue, PostgresServiceStore

SEED = "http://127.0.0.1:9/"


def _record_crawl(pg_url: str, crawl_id: int, *, seeded: bool, workers: int = 0) -> None:
    store = store_open.create_crawl(pg_url, [SEED], CrawlSettings(), crawl_id=crawl_id)
    try:
        if seeded:
            seed = Discovered(url=SEED, host="127.0.0.1:9", kind=UrlKind.PAGE, element="seed")
            asyncio.run(store.enqueue([seed], 1.0))
            for i in range(workers):
                asyncio.run(store.register_worker(f"worker-{i}-of-{crawl_id}", 1.0))
    finally:
        store.close()


async def _entries(pg_url: str, count: int) -> list[int]:
    store = await PostgresServiceStore.open(pg_url)
    try:
        ids = []
        for i in range(count):
            entry = await store.insert([SEED], {}, float(i))
            entry.state = "running"
            await store.update(entry)
            ids.append(entry.id)
        return ids
    finally:
        await store.close()


async def _seed_marks(pg_url: str, ids: list[int]) -> tuple[list[int], str | None]:
    store = await PostgresServiceStore.open(pg_url)
    queue = await PostgresCrawlQueue.open(pg_url)
    try:
        for crawl_id in ids:
            await store.mark_seeded(crawl_id, 2.0)
        return await queue.joinable(), await queue.state(ids[0])
    finally:
        await queue.close()
        await store.close()


def test_workers_join_seeded_running_crawls_the_least_staffed_first(pg_url: str) -> None:
    staffed, empty, unseeded = asyncio.run(_entries(pg_url, 3))
    _record_crawl(pg_url, staffed, seeded=True, workers=1)
    _record_crawl(pg_url, empty, seeded=True)
    _record_crawl(pg_url, unseeded, seeded=False)
    joinable, state = asyncio.run(_seed_marks(pg_url, [staffed, empty]))
    assert joinable == [empty, staffed]
    assert state == "running"


async def _prepare(pg_url: str, crawl_id: int) -> tuple[int | None, object]:
    store = await PostgresServiceStore.open(pg_url)
    try:
        return await store.prepare(crawl_id), await store.snapshot(crawl_id)
    finally:
        await store.close()


def test_prepare_resumes_a_seeded_crawl_and_clears_one_a_kill_left_empty(pg_url: str) -> None:
    seeded, empty, never = asyncio.run(_entries(pg_url, 3))
    _record_crawl(pg_url, seeded, seeded=True)
    _record_crawl(pg_url, empty, seeded=False)
    orphaned, snapshot = asyncio.run(_prepare(pg_url, seeded))
    assert orphaned == 0  # resumed; no lease held
    assert snapshot is not None
    assert asyncio.run(_prepare(pg_url, empty)) == (None, None)  # crawl row removed
    assert asyncio.run(_prepare(pg_url, never)) == (None, None)


async def _delete_in_batches(pg_url: str, crawl_id: int) -> tuple[int, int, int]:
    import asyncpg  # type: ignore[import-untyped]  # no type information

    from crawler.store.postgres import service_store

    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute(
            "INSERT INTO cookie (crawl_id, domain, path, name, value, host_only, secure, "
            "http_only, updated_at) VALUES ($1, '127.0.0.1', '/', 's', 'v', true, false, "
            "false, 1.0)",
            crawl_id,
        )
        ids = [r[0] for r in await conn.fetch("SELECT id FROM url WHERE crawl_id = $1", crawl_id)]
        # Rows keyed by a URL: the delete names each table (no foreign key cascades).
        await conn.execute(
            "INSERT INTO result (url_id, class, status, checked_at) VALUES ($1, 'ok', 200, 1.0)",
            ids[0],
        )
        await conn.execute("INSERT INTO page_validator (url_id, etag) VALUES ($1, 'e')", ids[0])
        await conn.execute(
            "INSERT INTO render_issue (url_id, seq, kind, message) "
            "VALUES ($1, 0, 'script_error', 'm')",
            ids[0],
        )
        store = await PostgresServiceStore.open(pg_url)
        saved = service_store.DELETE_BATCH
        service_store.DELETE_BATCH = 2  # several batches for the few URLs
        try:
            await store.delete(crawl_id)
        finally:
            service_store.DELETE_BATCH = saved
            await store.close()
        counts = [
            await conn.fetchval(f"SELECT count(*) FROM {table} WHERE crawl_id = $1", crawl_id)
            for table in ("url", "cookie")
        ]
        for table in ("result", "page_validator", "render_issue"):
            left = f"SELECT count(*) FROM {table} WHERE url_id = ANY($1::bigint[])"
            assert await conn.fetchval(left, ids) == 0, table
        entry = await conn.fetchval("SELECT count(*) FROM service_crawl WHERE id = $1", crawl_id)
        return int(counts[0]), int(counts[1]), int(entry)
    finally:
        await conn.close()


def test_a_crawl_with_cookies_and_urls_is_deleted_in_batches(pg_url: str) -> None:
    (crawl_id,) = asyncio.run(_entries(pg_url, 1))
    store = store_open.create_crawl(pg_url, [SEED], CrawlSettings(), crawl_id=crawl_id)
    try:
        found = [
            Discovered(url=f"{SEED}p/{i}", host="127.0.0.1:9", kind=UrlKind.PAGE, element="a")
            for i in range(7)
        ]
        asyncio.run(store.enqueue(found, 1.0))
    finally:
        store.close()
    assert asyncio.run(_delete_in_batches(pg_url, crawl_id)) == (0, 0, 0)
