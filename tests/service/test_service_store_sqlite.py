"""The SQLite service store with a definition's runs in one file, without a service process.

Where each crawl lives (a one-off crawl's own file; a definition's runs in
``definitions/<id>.db`` under the service's ids), and what ``prepare`` does in
the shared file: resume a run with a frontier, clear one a kill left without
seeds, leaving the other runs and the file alone.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from crawler.config import CrawlSettings
from crawler.models import Discovered, UrlKind
from crawler.store import open as store_open
from crawler.store.service import CrawlTarget
from crawler.store.sqlite.service_index import SqliteServiceStore

SEED = "http://127.0.0.1:9/"


def _record_crawl(path: Path, crawl_id: int | None, *, seeded: bool) -> None:
    seeds = [Discovered(url=SEED, host="127.0.0.1:9", kind=UrlKind.PAGE, element="seed")]
    store = store_open.create_crawl(
        path, [SEED], CrawlSettings(), seeds=seeds if seeded else (), crawl_id=crawl_id
    )
    store.close()


async def _runs_share_a_file(data: Path) -> None:
    store = await SqliteServiceStore.open(data)
    try:
        one_off = (await store.insert([SEED], {}, 1.0)).id
        seeded, empty, never = [
            (await store.insert([SEED], {}, 2.0 + i, definition_id=5)).id for i in range(3)
        ]
        shared = data / "definitions" / "5.db"
        assert store.target(one_off) == CrawlTarget(data / "crawls" / f"{one_off}.db", None)
        for run in (seeded, empty, never):
            assert store.target(run) == CrawlTarget(shared, run)
        _record_crawl(data / "crawls" / f"{one_off}.db", None, seeded=True)
        _record_crawl(shared, seeded, seeded=True)
        _record_crawl(shared, empty, seeded=False)  # a kill before its seeds
        assert await store.prepare(seeded) == 0  # resumed, no lease held
        assert await store.prepare(empty) is None  # started afresh: its row removed
        assert await store.prepare(never) is None
        assert await store.snapshot(empty) is None
        assert await store.snapshot(seeded) is not None
        assert await store.snapshot(one_off) is not None
        assert shared.exists()
    finally:
        await store.close()
    reopened = await SqliteServiceStore.open(data)  # learns the runs from the index
    try:
        assert reopened.target(seeded) == CrawlTarget(shared, seeded)
        assert reopened.target(one_off).crawl_id is None
    finally:
        await reopened.close()


def test_runs_share_their_definition_file_and_prepare_touches_only_the_one_run(
    tmp_path: Path,
) -> None:
    asyncio.run(_runs_share_a_file(tmp_path / "data"))
