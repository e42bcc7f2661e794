"""The service on PostgreSQL: its index and crawls in one database, `crawler work` joining.

The key API tests of ``test_service_api`` run here again against a service
started with ``CRAWLER_DB=postgresql://…`` (imported below: the module's own
``service`` fixture replaces the SQLite one). Then what only PostgreSQL
allows: remote workers join a crawl, show in the API with their rates, stop
when it is paused, and a worker and the service killed with SIGKILL
mid-crawl lose nothing and repeat nothing beyond the leases they held.
"""

from __future__ import annotations

import asyncio
import os
import signal
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_service_api import (  # the key API tests, on PostgreSQL (module docstring)
    test_a_crawl_runs_to_the_end_with_counters_and_reports,
    test_crawls_beyond_max_running_queue,
    test_deleting_a_running_crawl_stops_it_first,
    test_every_log_line_of_a_crawl_carries_its_id,
    test_finished_crawls_refuse_pause_resume_and_cancel,
    test_health_readiness_and_metrics,
    test_pause_resume_cancel_and_delete,
    test_the_list_shows_every_crawl_newest_first,
)
from test_service_numbers import (  # the API's numbers are the report's, on PostgreSQL too
    failing,
    test_progress_counts_pages_and_broken_links_as_the_report_does,
)
from test_service_stats import test_stats_count_requests_per_host_and_exclusions_by_reason

from kit import crawlkit, pgkit
from kit.serve_site import ThreadedSite
from kit.service_sites import tree_site
from kit.servicekit import ServiceProcess
from kit.sitekit import wait_until_sync
from kit.workerkit import WorkerProcess, leased_urls_of, scalar

__all__ = [
    "failing",
    "test_a_crawl_runs_to_the_end_with_counters_and_reports",
    "test_crawls_beyond_max_running_queue",
    "test_deleting_a_running_crawl_stops_it_first",
    "test_every_log_line_of_a_crawl_carries_its_id",
    "test_finished_crawls_refuse_pause_resume_and_cancel",
    "test_health_readiness_and_metrics",
    "test_pause_resume_cancel_and_delete",
    "test_progress_counts_pages_and_broken_links_as_the_report_does",
    "test_stats_count_requests_per_host_and_exclusions_by_reason",
    "test_the_list_shows_every_crawl_newest_first",
]

SERVICE_ARGS = ["--allow-private", "--max-running", "2", "--shutdown-timeout", "2"]
# Small lease batches spread the crawl over every process; the shared per-host
# interval makes it last long enough to kill processes in the middle of it.
SETTINGS = {
    "max_concurrency": 2,
    "max_retries": 0,
    "lease_batch": 4,
    "lease_ttl_s": 10,
    "host_request_interval_s": 0.04,
}
TREE_PAGES = 150
ROBOTS = "/robots.txt"  # fetched once per crawl and process that finds none stored yet


@pytest.fixture(scope="module")
def module_pg() -> Iterator[str]:
    pgkit.require_postgres()
    url = pgkit.create_database()
    try:
        yield url
    finally:
        pgkit.drop_database(url)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, module_pg: str) -> Iterator[ServiceProcess]:
    """The service of ``conftest``, but on PostgreSQL (through the environment)."""
    data: Path = tmp_path_factory.mktemp("service-pg") / "data"
    with ServiceProcess(data, SERVICE_ARGS, env={"CRAWLER_DB": module_pg}) as process:
        yield process


@pytest.fixture(scope="module")
def tree() -> Iterator[ThreadedSite]:
    with ThreadedSite(tree_site(TREE_PAGES)) as server:
        yield server


def _path(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def test_a_deleted_crawl_leaves_no_rows(
    service: ServiceProcess, module_pg: str, site: ThreadedSite
) -> None:
    crawl_id = service.create([site.url("/")], max_retries=0)["id"]
    service.wait_state(crawl_id, "finished")
    assert scalar(module_pg, "SELECT count(*) FROM url WHERE crawl_id = $1", crawl_id) > 0
    assert service.request("DELETE", f"/crawls/{crawl_id}").status == 204
    for sql in (
        "SELECT count(*) FROM url WHERE crawl_id = $1",
        "SELECT count(*) FROM crawl WHERE id = $1",
        "SELECT count(*) FROM service_crawl WHERE id = $1",
    ):
        assert scalar(module_pg, sql, crawl_id) == 0, sql


def test_remote_workers_join_show_their_rates_and_stop_on_pause(
    tmp_path: Path, pg_url: str, tree: ThreadedSite
) -> None:
    with (
        ServiceProcess(tmp_path / "data", SERVICE_ARGS, env={"CRAWLER_DB": pg_url}) as svc,
        WorkerProcess(pg_url, tmp_path) as worker,
    ):
        crawl_id = svc.create([tree.url("/")], **SETTINGS)["id"]

        def remote_worker_counted() -> bool:
            rows = svc.crawl(crawl_id)["workers"]
            mine = [w for w in rows if w["pid"] == worker.pid]
            return bool(mine) and mine[0]["crawled"] > 0 and mine[0]["urls_per_s"] > 0

        wait_until_sync(remote_worker_counted, 30, 0.05, "the remote worker in the API")
        pids = {w["pid"] for w in svc.crawl(crawl_id)["workers"]}
        assert pids == {worker.pid, svc.process.pid if svc.process else 0}

        assert svc.request("POST", f"/crawls/{crawl_id}/pause").status == 200
        paused = svc.wait_state(crawl_id, "paused")
        assert paused["workers"] == []
        wait_until_sync(
            lambda: "crawl_stopped_by_service" in worker.event_names(), 15, 0.05, "worker left"
        )
        wait_until_sync(
            lambda: (
                scalar(pg_url, "SELECT count(*) FROM worker WHERE crawl_id = $1", crawl_id) == 0
            ),
            15,
            0.05,
            "worker rows gone",
        )
        assert scalar(pg_url, "SELECT count(*) FROM url WHERE state = 1") == 0  # leases back

        assert svc.request("POST", f"/crawls/{crawl_id}/resume").status == 200
        wait_until_sync(
            lambda: worker.event_names().count("crawl_joined") >= 2, 30, 0.05, "joined again"
        )
        svc.wait_state(crawl_id, "finished", timeout=60)
    assert worker.process is not None
    assert worker.process.returncode == 128 + signal.SIGTERM  # it idled until told to stop


def test_killed_worker_and_service_lose_nothing_and_repeat_only_their_leases(
    tmp_path: Path, pg_url: str, tree: ThreadedSite
) -> None:
    seed = tree.url("/")
    tree.reset()
    reference = asyncio.run(crawlkit.crawl(pg_url, [seed], **SETTINGS))  # the CLI's, same site
    once = tree.counts()
    total = sum(once.values())
    tree.reset()

    data = tmp_path / "data"
    env = {"CRAWLER_DB": pg_url}
    killed_leases: set[str] = set()
    with (
        WorkerProcess(pg_url, tmp_path) as first,
        WorkerProcess(pg_url, tmp_path) as second,
    ):
        with ServiceProcess(data, SERVICE_ARGS, env=env) as svc:
            crawl_id = svc.create([seed], **SETTINGS)["id"]
            wait_until_sync(
                lambda: len(svc.crawl(crawl_id)["workers"]) == 3, 30, 0.02, "three workers"
            )
            wait_until_sync(lambda: tree.request_count() >= total * 0.25, 30, 0.005, "a quarter")
            first.freeze()
            killed_leases |= leased_urls_of(pg_url, first.pid)
            first.kill()
            at_worker_kill = tree.request_count()
            wait_until_sync(
                lambda: tree.request_count() >= at_worker_kill + 10, 30, 0.005, "work goes on"
            )
            assert svc.process is not None
            os.kill(svc.process.pid, signal.SIGSTOP)
            killed_leases |= leased_urls_of(pg_url, svc.process.pid)
            svc.kill()
        at_service_kill = tree.request_count()
        assert at_service_kill < total, "the crawl ended before the kills"
        with ServiceProcess(data, SERVICE_ARGS, env=env) as again:
            crawl = again.wait_state(crawl_id, "finished", timeout=90)
            resumed = [e for e in again.log_lines() if e["event"] == "crawls_resuming"]
        assert "crawl_joined" in second.event_names()
    assert resumed
    assert crawl_id in resumed[0]["crawl_ids"]
    assert crawl["progress"]["pending"] == crawl["progress"]["leased"] == 0
    assert crawlkit.comparable(crawlkit.read_report(pg_url, crawl_id)) == crawlkit.comparable(
        reference
    )

    counts = tree.counts()
    repeated = {
        key: n - once[key] for key, n in counts.items() if n > once[key] and key[1] != ROBOTS
    }
    killed_paths = {_path(url) for url in killed_leases}
    assert {path for _, path in repeated} <= killed_paths, (repeated, killed_paths)
    assert all(extra <= once[key] for key, extra in repeated.items()), repeated
    assert set(counts) - {(m, p) for m, p in counts if p == ROBOTS} <= set(once)


def test_deleting_a_crawl_sends_its_remote_workers_away_first(
    tmp_path: Path, pg_url: str, slow: ThreadedSite
) -> None:
    with (
        ServiceProcess(tmp_path / "data", SERVICE_ARGS, env={"CRAWLER_DB": pg_url}) as svc,
        WorkerProcess(pg_url, tmp_path) as worker,
    ):
        crawl_id = svc.create([slow.url("/")], max_concurrency=1, max_retries=0)["id"]
        wait_until_sync(
            lambda: any(w["pid"] == worker.pid for w in svc.crawl(crawl_id)["workers"]),
            30,
            0.05,
            "the remote worker joined",
        )
        assert svc.request("DELETE", f"/crawls/{crawl_id}").status == 204
        assert "crawl_stopped_by_service" in worker.event_names()
        assert scalar(pg_url, "SELECT count(*) FROM url WHERE crawl_id = $1", crawl_id) == 0
        assert worker.process is not None
        assert worker.process.poll() is None  # still there, waiting for the next crawl
        assert "crawl_work_failed" not in worker.event_names()


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/crawls",
            {"seeds": ["http://127.0.0.1:9/"], "settings": {"headers": {"X": "\x00"}}},
            "settings.headers.X",
        ),
        (
            "/definitions",
            {"name": "a\x00b", "seeds": ["http://127.0.0.1:9/"], "schedule": {"every": "1h"}},
            "name",
        ),
    ],
)
def test_a_nul_in_a_request_is_a_422_not_a_store_failure(
    service: ServiceProcess, path: str, body: dict[str, object], field: str
) -> None:
    """PostgreSQL keeps no NUL in a text: before, these were 500s from the store."""
    answer = service.request("POST", path, body)
    assert answer.status == 422, answer.body
    assert answer.json()["field"] == field
    assert service.request("GET", path).status == 200
