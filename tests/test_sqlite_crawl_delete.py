"""Deleting one crawl from a SQLite file other crawls share (the service's retention).

The crawls of a file are crawled for real against a loopback site; one is deleted in
batches of 50 URLs; the others read back as before, no row of the deleted crawl or
link from its pages is left, the file passes its integrity and foreign-key checks, and
the next crawl takes the freed pages before the file grows.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawler.store.sqlite import crawl_delete

from kit import crawlkit
from kit.serve_site import ThreadedSite
from kit.sitekit import Page, Site

CRAWL_TABLES = ("url", "worker", "robots", "cookie", "crawl_count")
PAGES = 300  # enough rows that a crawl's delete frees whole database pages


def ring_site() -> Site:
    """Pages in a ring, each linking to the next five and to a missing page."""
    site: Site = {"/": Page(links=["/p/0"])}
    for i in range(PAGES):
        links = [f"/p/{(i + k) % PAGES}" for k in range(1, 6)]
        site[f"/p/{i}"] = Page(links=[*links, f"/missing/{i % 7}"])
    return site


@pytest.fixture
def site() -> Iterator[ThreadedSite]:
    with ThreadedSite(ring_site()) as server:
        yield server


def _scalar(path: Path, sql: str, *args: object) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(sql, args).fetchone()[0])
    finally:
        conn.close()


def test_one_crawl_goes_in_batches_and_the_others_stay_whole(
    tmp_path: Path, site: ThreadedSite
) -> None:
    db = tmp_path / "definition.db"
    for _ in range(3):
        asyncio.run(crawlkit.crawl(db, [site.url("/")]))
    kept = {i: crawlkit.comparable(crawlkit.read_report(db, i)) for i in (1, 3)}
    urls_of_2 = _scalar(db, "SELECT count(*) FROM url WHERE crawl_id = 2")
    assert urls_of_2 > 2
    conn = sqlite3.connect(db)  # as a rendered page of crawl 2 leaves it (--render)
    with conn:
        conn.execute(
            "INSERT INTO render_issue (url_id, seq, kind, message) "
            "SELECT min(id), 0, 'script_error', 'm' FROM url WHERE crawl_id = 2"
        )
    conn.close()

    batches = crawl_delete.delete_crawl(db, 2, batch=50)

    assert batches == -(-urls_of_2 // 50)
    assert {i: crawlkit.comparable(crawlkit.read_report(db, i)) for i in (1, 3)} == kept
    assert _scalar(db, "SELECT count(*) FROM crawl WHERE id = 2") == 0
    for table in CRAWL_TABLES:
        assert _scalar(db, f"SELECT count(*) FROM {table} WHERE crawl_id = 2") == 0
    for table in ("link_open", "link_fresh", "link_settled"):
        for end in ("source_id", "target_id"):
            orphans = f"SELECT count(*) FROM {table} WHERE {end} NOT IN (SELECT id FROM url)"
            assert _scalar(db, orphans) == 0
    for table in ("result", "anchor", "page_validator", "render_issue"):
        orphans = f"SELECT count(*) FROM {table} WHERE url_id NOT IN (SELECT id FROM url)"
        assert _scalar(db, orphans) == 0
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()

    free = _scalar(db, "PRAGMA freelist_count")
    pages = _scalar(db, "PRAGMA page_count")
    assert free > 0  # the deleted crawl's pages, kept in the file
    asyncio.run(crawlkit.crawl(db, [site.url("/")]))
    _scalar(db, "PRAGMA wal_checkpoint(TRUNCATE)")
    assert _scalar(db, "PRAGMA freelist_count") < free  # the next crawl took them
    assert _scalar(db, "PRAGMA page_count") - pages < free  # and grew the file by less


def test_deleting_a_crawl_absent_from_the_file_or_a_missing_file_does_nothing(
    tmp_path: Path, site: ThreadedSite
) -> None:
    db = tmp_path / "definition.db"
    assert crawl_delete.delete_crawl(db, 1) == 0
    assert not db.exists()
    asyncio.run(crawlkit.crawl(db, [site.url("/")]))
    assert crawl_delete.delete_crawl(db, 7) == 0
    assert crawlkit.read_report(db, 1).summary.pages > 0
