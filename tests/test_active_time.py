"""A crawl's active time is in its database while it runs, not only when it ends.

After ``kill -9`` the report's elapsed time and rates must still be true (a
27 s crawl was reported as 5.9 s and 1,708 pages/s when the time was written
only at the end of a run). The run adds its time every ``ELAPSED_EVERY_S``;
this reads it from the database, on both backends, while the run goes on.
"""

from __future__ import annotations

import asyncio

import pytest

from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.store import open as store_open

from kit.sitekit import Page, wait_until

BOUND_S = 30.0
PAGES = 40


def _elapsed(db: str, crawl_id: int) -> float:
    return store_open.load_report(db, crawl_id).crawl.elapsed_s


async def test_active_time_is_recorded_while_the_crawl_runs(
    any_db: str,
    site_server,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setattr(runner, "ELAPSED_EVERY_S", 0.1)
    site = {
        ("/" if i == 0 else f"/p/{i}"): Page(links=[f"/p/{i + 1}"], delay_s=0.1)
        for i in range(PAGES)
    }
    server = await site_server(site)
    job = runner.start(any_db, [server.url("/")], CrawlSettings(max_concurrency=1))
    run = asyncio.create_task(job.run(shutdown_timeout_s=2))
    try:
        await wait_until(
            lambda: asyncio.to_thread(_elapsed, any_db, job.crawl_id), BOUND_S, 0.05,
            "active time in the database",
        )  # fmt: skip
        assert not run.done()  # recorded during the run, not at its end
    finally:
        job.stop()
        await asyncio.wait_for(run, BOUND_S)
        job.close()
    assert _elapsed(any_db, job.crawl_id) > 0
