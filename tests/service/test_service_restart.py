"""Restarts lose nothing: a killed service resumes its crawls, SIGTERM stops them cleanly."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit import crawlkit
from kit.serve_site import ThreadedSite
from kit.service_sites import tree_site
from kit.servicekit import ServiceProcess
from kit.sitekit import wait_until_sync

SETTINGS = {"max_concurrency": 2, "max_retries": 0}


@pytest.fixture(scope="module")
def tree() -> Iterator[ThreadedSite]:
    with ThreadedSite(tree_site()) as server:
        yield server


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _leased(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM url WHERE state = 1").fetchone()[0])
    finally:
        conn.close()


def test_a_killed_service_resumes_its_crawl_to_the_same_report(
    tmp_path: Path, tree: ThreadedSite
) -> None:
    seed = tree.url("/")
    reference = asyncio.run(crawlkit.crawl(tmp_path / "reference.db", [seed], **SETTINGS))
    total_requests = tree.request_count()
    tree.reset()

    data = tmp_path / "data"
    with ServiceProcess(data, ["--allow-private"]) as first:
        crawl_id = first.create([seed], **SETTINGS)["id"]
        wait_until_sync(
            lambda: tree.request_count() >= total_requests * 0.4, 30, 0.005, "crawl half-way"
        )
        first.kill()
    db_path = data / "crawls" / f"{crawl_id}.db"
    leased_at_kill = _leased(db_path)
    assert leased_at_kill > 0 or tree.request_count() < total_requests  # really mid-crawl
    killed_at = tree.request_count()

    with ServiceProcess(data, ["--allow-private"]) as second:
        wait_until_sync(lambda: tree.request_count() > killed_at, 15, 0.005, "requests resume")
        resume_s = time.monotonic() - second.started_at
        crawl = second.wait_state(crawl_id, "finished", timeout=60)
        resumed_events = [e for e in second.log_lines() if e["event"] == "crawls_resuming"]
    assert resumed_events
    assert crawl_id in resumed_events[0]["crawl_ids"]
    assert crawl["progress"]["pending"] == crawl["progress"]["leased"] == 0
    assert crawlkit.comparable(crawlkit.read_report(db_path)) == crawlkit.comparable(reference)
    assert _integrity(db_path) == "ok"
    assert resume_s < 10, f"took {resume_s:.2f}s to resume"
    # Only rows leased and not yet committed at the kill may have been requested twice.
    assert tree.request_count() <= total_requests + leased_at_kill + 2


def test_sigterm_stops_running_crawls_gracefully_and_they_resume(
    tmp_path: Path, slow: ThreadedSite
) -> None:
    data = tmp_path / "data"
    with ServiceProcess(data, ["--allow-private", "--shutdown-timeout", "2"]) as first:
        crawl_id = first.create([slow.url("/")], max_concurrency=1, max_retries=0)["id"]
        wait_until_sync(lambda: first.crawl(crawl_id)["progress"]["crawled"] >= 2, 15)
        assert first.terminate() == 0
        events = [line["event"] for line in first.log_lines()]
    assert {"service_stopping", "crawls_stopping", "crawl_stopped", "service_stopped"} <= set(
        events
    )
    db_path = data / "crawls" / f"{crawl_id}.db"
    assert _leased(db_path) == 0  # the engine gave its leases back
    stopped_at = slow.request_count()

    with ServiceProcess(data, ["--allow-private", "--shutdown-timeout", "2"]) as second:
        assert second.crawl(crawl_id)["state"] == "running"
        wait_until_sync(lambda: slow.request_count() > stopped_at, 15, message="resumed")
        assert second.request("DELETE", f"/crawls/{crawl_id}").status == 204
