"""Per-worker rates from samples of ``worker`` rows, and `crawler work --service` usage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from crawler.cli import main as cli
from crawler.service import openapi
from crawler.service.progress import WORKER_ID_CHARS, WorkerTracker
from crawler.store.service import WorkerRow

from kit.serve_site import ThreadedSite
from kit.servicekit import ServiceProcess
from kit.sitekit import wait_until_sync


def _row(token: str, urls: int, pages: int) -> WorkerRow:
    return WorkerRow(token, 4242, "box", 1000.0, 1010.0, urls, pages)


def test_worker_rates_come_from_two_samples_and_gone_workers_drop_out() -> None:
    tracker = WorkerTracker()
    tracker.observe([_row("a" * 32, 0, 0), _row("b" * 32, 10, 5)], 0.0)
    first = tracker.views()
    assert [(v.pages_per_s, v.urls_per_s) for v in first] == [(0.0, 0.0), (0.0, 0.0)]
    tracker.observe([_row("a" * 32, 40, 20), _row("b" * 32, 10, 5)], 2.0)
    views = {v.id: v for v in tracker.views()}
    assert views["a" * WORKER_ID_CHARS].urls_per_s == 20.0
    assert views["a" * WORKER_ID_CHARS].pages_per_s == 10.0
    assert views["b" * WORKER_ID_CHARS].urls_per_s == 0.0
    assert views["a" * WORKER_ID_CHARS].crawled == 40
    tracker.observe([_row("b" * 32, 12, 6)], 3.0)
    assert [v.id for v in tracker.views()] == ["b" * WORKER_ID_CHARS]


def test_work_service_needs_postgres(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["work", "--service", "--db", str(tmp_path / "c.db"), "--no-progress"])
    assert code == 3
    assert "postgresql://" in capsys.readouterr().err


def test_work_service_takes_no_crawl_id(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["work", "--service", "--crawl", "1", "--db", "postgresql://x@127.0.0.1/x"])
    assert code == 3
    assert "--crawl" in capsys.readouterr().err


def test_work_service_exits_when_idle_if_asked(pg_url: str) -> None:
    code = cli.main(["work", "--service", "--exit-when-idle", "--db", pg_url, "--no-progress"])
    assert code == 0


def test_the_workers_route_lists_the_engine_of_a_running_crawl(
    service: ServiceProcess, slow: ThreadedSite
) -> None:
    crawl_id = service.create([slow.url("/")], max_concurrency=1, max_retries=0)["id"]
    try:

        def counted() -> list[dict[str, Any]]:
            answer = service.get(f"/crawls/{crawl_id}/workers")
            assert answer.status == 200, answer.body
            workers: list[dict[str, Any]] = answer.json()["workers"]
            return [w for w in workers if w["crawled"] > 0]

        (worker,) = wait_until_sync(counted, 30, 0.05, "the service's engine counted")
        assert service.process is not None
        assert worker["pid"] == service.process.pid
        document = openapi.document()
        schema = {"$ref": "#/components/schemas/WorkerView", "components": document["components"]}
        jsonschema.validate(worker, schema, cls=jsonschema.Draft202012Validator)
    finally:
        assert service.request("DELETE", f"/crawls/{crawl_id}").status == 204
    assert service.get(f"/crawls/{crawl_id}/workers").status == 404
