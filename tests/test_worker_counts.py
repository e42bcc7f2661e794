"""Each worker's counters (``worker.urls_done``, ``pages_done``) on both backends.

They grow in the transaction that completes a batch, by the accepted outcomes
that carry a result: a retry or a stale completion adds nothing. The service
turns two samples of them into each worker's rate.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import asyncpg

from crawler.config import CrawlSettings
from crawler.models import Discovered, Outcome, Result, ResultClass, UrlKind
from crawler.store import open as store_open

from kit.pgkit import run_async

ORIGIN = "http://127.0.0.1:9"


def _seed(path: str, kind: UrlKind) -> Discovered:
    return Discovered(url=f"{ORIGIN}/{path}", host="127.0.0.1:9", kind=kind, element="a")


def _counters(db: str, token: str) -> tuple[int, int]:
    sql = "SELECT urls_done, pages_done FROM worker WHERE token = "
    if store_open.is_postgres_url(db):

        async def read() -> Any:
            conn = await asyncpg.connect(db)
            try:
                return await conn.fetchrow(sql + "$1", token)
            finally:
                await conn.close()

        row = run_async(read())
    else:
        conn = sqlite3.connect(db)
        try:
            row = conn.execute(sql + "?", (token,)).fetchone()
        finally:
            conn.close()
    return int(row[0]), int(row[1])


async def _scenario(db: str) -> tuple[tuple[int, int], tuple[int, int]]:
    store = store_open.create_crawl(db, [f"{ORIGIN}/"], CrawlSettings())
    try:
        await store.enqueue(
            [_seed("", UrlKind.PAGE), _seed("a", UrlKind.PAGE), _seed("x.png", UrlKind.CHECK)],
            1.0,
        )
        await store.register_worker("w1", 1.0)
        await store.register_worker("w2", 1.0)
        leased = await store.lease("w1", 10, 60.0, 1.0)
        assert len(leased) == 3
        by_url = {row.url.removeprefix(ORIGIN): row for row in leased}
        ok = Result(ResultClass.OK, status=200)
        await store.complete(
            "w1",
            [
                Outcome(by_url["/"], ok),
                Outcome(by_url["/x.png"], ok),
                Outcome(by_url["/a"], None, retry_at=2.0),  # a retry: not done
            ],
            1.5,
        )
        # w2 completes a row it never held: rejected, counts nothing.
        await store.complete("w2", [Outcome(by_url["/a"], ok)], 1.6)
        return _counters(db, "w1"), _counters(db, "w2")
    finally:
        store.close()


def test_workers_count_what_they_complete(any_db: str) -> None:
    first, second = asyncio.run(_scenario(any_db))
    assert first == (2, 1)  # two URLs done, one of them a page
    assert second == (0, 0)
