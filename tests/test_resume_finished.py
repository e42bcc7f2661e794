"""Resuming a finished crawl says what happens: nothing, or a crawl of seeds never crawled.

A crawl recorded finished with an empty frontier (killed between recording the
crawl and enqueuing its seeds, then resumed by a version before
``crawl.seeded_at``) is crawled from its seeds on resume; saying "has already
finished" there was wrong, as the crawl then ran.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from crawler.config import CrawlSettings
from crawler.store import open as store_open

from kit.clikit import run_cli
from kit.serve_site import ThreadedSite
from kit.sitekit import Page


def finished_without_seeds(db: str, seed: str) -> None:
    """A crawl recorded with an empty, unseeded frontier and marked finished."""
    store = store_open.create_crawl(db, [seed], CrawlSettings(), seeds=(), seeded=False)
    try:
        assert asyncio.run(store.finish_if_quiescent(1.0))
    finally:
        store.close()


def test_a_finished_crawl_left_without_seeds_is_crawled_and_says_so(
    tmp_path: Path, any_db: str
) -> None:
    with ThreadedSite({"/": Page(links=["/gone"])}) as served:
        finished_without_seeds(any_db, served.url("/"))
        result = run_cli("resume", "--db", any_db, "-n", "-f", "json", cwd=tmp_path)
        requests = served.request_count()
        gone = served.url("/gone")
    assert result.returncode == 2, result.stderr
    assert "has already finished" not in result.stderr
    assert "marked finished before its seeds were crawled; crawling from them now" in (
        result.stderr
    )
    assert requests >= 2
    assert [b["url"] for b in json.loads(result.stdout)["broken"]] == [gone]


def test_a_finished_crawl_is_not_crawled_again_and_says_so(tmp_path: Path, any_db: str) -> None:
    with ThreadedSite({"/": Page(links=["/gone"])}) as served:
        first = run_cli("crawl", served.url("/"), "--db", any_db, "-n", cwd=tmp_path)
        assert first.returncode == 2, first.stderr
        before = served.request_count()
        result = run_cli("resume", "--db", any_db, "-n", cwd=tmp_path)
        assert served.request_count() == before
    assert result.returncode == 2, result.stderr
    assert "has already finished" in result.stderr
    assert "crawling from them" not in result.stderr
