"""A service killed with SIGKILL keeps its definitions, their schedule positions and its
pending webhook deliveries: the restarted one starts no extra run and delivers them."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crawler.service.manager import PAUSE_BEFORE_FINISH_ENV

from kit import pgkit
from kit.serve_site import ThreadedSite
from kit.service_sites import small_site
from kit.servicekit import ServiceProcess
from kit.sitekit import Page, wait_until_sync

SECRET = "webhook-secret-0123456789"  # noqa: S105 - a test secret
ARGS = ["--allow-private", "--shutdown-timeout", "2"]
DELIVERY_BOUND_S = 40  # the first retry comes 10 s after the failed attempt


class _Hook(http.server.BaseHTTPRequestHandler):
    statuses: list[int]
    bodies: list[bytes]

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.bodies.append(self.rfile.read(length))
        self.send_response(self.statuses[0])
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[tuple[type[_Hook], str]]:
    handler = type("Hook", (_Hook,), {"statuses": [500], "bodies": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["sqlite", "postgresql"])
def env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":
        yield {}
        return
    pgkit.require_postgres()
    url = pgkit.create_database()
    try:
        yield {"CRAWLER_DB": url}
    finally:
        pgkit.drop_database(url)


def _definition(service: ServiceProcess, did: int) -> dict[str, Any]:
    answer = service.get(f"/definitions/{did}")
    assert answer.status == 200, answer.body
    body: dict[str, Any] = answer.json()
    return body


def _finished(service: ServiceProcess, did: int, crawl_id: int) -> bool:
    return bool(_definition(service, did)["last_finished_run"] == crawl_id)


def _deliveries(service: ServiceProcess, did: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = service.get(f"/definitions/{did}/deliveries").json()["deliveries"]
    return rows


def test_definitions_schedules_and_pending_webhooks_survive_sigkill(
    tmp_path: Path, hook: tuple[type[_Hook], str], env: dict[str, str]
) -> None:
    handler, hook_url = hook
    data = tmp_path / "data"
    with ThreadedSite(small_site()) as site:
        body: dict[str, Any] = {
            "seeds": [site.url("/")],
            "settings": {"max_retries": 0},
            "schedule": {"every": "1h"},
            "webhook": {"url": hook_url, "secret": SECRET},
        }
        with ServiceProcess(data, ARGS, env=env) as first:
            created = first.request("POST", "/definitions", body)
            assert created.status == 201, created.body
            did, run1 = created.json()["id"], created.json()["active_run"]
            wait_until_sync(lambda: _finished(first, did, run1), 30, 0.05, "first run")
            site.server.site["/a"] = Page(links=["/b", "/new-missing", "/old"])
            # A new schedule starts again from now: the second run starts at once.
            replaced = first.request(
                "PUT", f"/definitions/{did}", {**body, "schedule": {"every": "2h"}}
            )
            assert replaced.status == 200, replaced.body
            run2 = replaced.json()["active_run"]
            wait_until_sync(lambda: _finished(first, did, run2), 30, 0.05, "second run")
            wait_until_sync(lambda: handler.bodies, 15, 0.05, "the webhook was called")
            wait_until_sync(
                lambda: _deliveries(first, did)[0]["attempts"] == 1, 15, 0.05, "attempt recorded"
            )
            before = _definition(first, did)
            first.kill()
        handler.statuses[0] = 200
        with ServiceProcess(data, ARGS, env=env) as second:
            after = _definition(second, did)
            assert after["next_run_at"] == before["next_run_at"]
            assert after["schedule"] == {"every": "2h", "timezone": "UTC"}
            assert after["webhook"]["has_secret"] is True
            wait_until_sync(
                lambda: _deliveries(second, did)[0]["state"] == "delivered",
                DELIVERY_BOUND_S,
                0.1,
                "the pending delivery was resumed and delivered",
            )
            delivered = _deliveries(second, did)
            runs = second.get(f"/definitions/{did}/runs").json()["runs"]
        assert [r["id"] for r in runs] == [run2, run1]  # no extra run after the restart
        assert len(delivered) == 1
        assert delivered[0]["attempts"] == 2
        assert len(handler.bodies) == 2
        assert handler.bodies[0] == handler.bodies[1]  # the same bytes, the same signature


def test_a_kill_between_a_runs_end_and_its_webhook_delivers_it_once_after_restart(
    tmp_path: Path, hook: tuple[type[_Hook], str], env: dict[str, str]
) -> None:
    """The second run's crawl is done and its diff has a new broken link; the service is
    killed before the run's end (and its delivery, in the same transaction) is recorded.
    The restarted service resumes the run, finds it done and delivers the webhook once."""
    handler, hook_url = hook
    handler.statuses[0] = 200
    data = tmp_path / "data"
    paused = tmp_path / "paused"
    with ThreadedSite(small_site()) as site:
        body: dict[str, Any] = {
            "seeds": [site.url("/")],
            "settings": {"max_retries": 0},
            "schedule": {"every": "1h"},
            "webhook": {"url": hook_url, "secret": SECRET},
        }
        with ServiceProcess(data, ARGS, env=env) as first:
            created = first.request("POST", "/definitions", body)
            assert created.status == 201, created.body
            did, run1 = created.json()["id"], created.json()["active_run"]
            wait_until_sync(lambda: _finished(first, did, run1), 30, 0.05, "first run")
        site.server.site["/a"] = Page(links=["/b", "/new-missing", "/old"])
        pausing = {**env, PAUSE_BEFORE_FINISH_ENV: str(paused)}
        with ServiceProcess(data, ARGS, env=pausing) as second:
            # A new schedule starts again from now: the second run starts at once.
            replaced = second.request(
                "PUT", f"/definitions/{did}", {**body, "schedule": {"every": "2h"}}
            )
            assert replaced.status == 200, replaced.body
            run2 = replaced.json()["active_run"]
            wait_until_sync(paused.exists, 30, 0.05, "the second run paused before its end")
            lines = second.log_lines()
            second.kill()
        assert paused.read_text() == str(run2)
        assert any(e["event"] == "engine_stopped" and e.get("finished") for e in lines)
        assert handler.bodies == []
        with ServiceProcess(data, ARGS, env=env) as third:
            wait_until_sync(lambda: _finished(third, did, run2), 30, 0.05, "second run resumed")
            wait_until_sync(
                lambda: [d["state"] for d in _deliveries(third, did)] == ["delivered"],
                DELIVERY_BOUND_S,
                0.1,
                "the webhook was delivered",
            )
            runs = third.get(f"/definitions/{did}/runs").json()["runs"]
            resumed = [e for e in third.log_lines() if e["event"] == "crawls_resuming"]
        assert [r["id"] for r in runs] == [run2, run1]
        assert resumed
        assert run2 in resumed[0]["crawl_ids"]
        assert len(handler.bodies) == 1
        assert json.loads(handler.bodies[0])["crawl_id"] == run2


CHAIN = 20


def test_a_killed_run_of_a_definition_resumes_in_its_storage_and_diffs_right(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The second run (a re-crawl, in the definition's SQLite file on SQLite) is killed
    mid-way; the restarted service resumes it there, the first run's data untouched."""
    data = tmp_path / "data"
    with ThreadedSite(small_site()) as site:
        body: dict[str, Any] = {
            "seeds": [site.url("/")],
            "settings": {"max_retries": 0, "max_concurrency": 1},
            "schedule": {"every": "1h"},
        }
        with ServiceProcess(data, ARGS, env=env) as first:
            created = first.request("POST", "/definitions", body)
            assert created.status == 201, created.body
            did, run1 = created.json()["id"], created.json()["active_run"]
            wait_until_sync(lambda: _finished(first, did, run1), 30, 0.05, "first run")
            chain = {
                f"/s/{i}": Page(links=[f"/s/{i + 1}"] if i + 1 < CHAIN else [], delay_s=0.1)
                for i in range(CHAIN)
            }
            site.server.site.update(chain)
            site.server.site["/b"] = Page(links=["/", "/a", "/s/0"])
            replaced = first.request(
                "PUT", f"/definitions/{did}", {**body, "schedule": {"every": "2h"}}
            )
            assert replaced.status == 200, replaced.body
            run2 = replaced.json()["active_run"]

            def half_way() -> bool:
                return sum(path.startswith("/s/") for _, path in site.requests()) >= CHAIN // 2

            wait_until_sync(half_way, 30, 0.01, "the second run half-way")
            first.kill()
        if not env:
            assert sorted(p.name for p in (data / "definitions").iterdir())[0] == f"{did}.db"
            assert not list((data / "crawls").glob("*.db"))  # no file per run
        with ServiceProcess(data, ARGS, env=env) as second:
            wait_until_sync(lambda: _finished(second, did, run2), 60, 0.05, "second run resumed")
            runs = second.get(f"/definitions/{did}/runs").json()["runs"]
            diff = second.get(f"/definitions/{did}/diff").json()
            first_report = second.get(f"/crawls/{run1}/report").json()
            resumed = [e for e in second.log_lines() if e["event"] == "crawls_resuming"]
        added = sorted(site.url(f"/s/{i}") for i in range(CHAIN))
    assert [r["id"] for r in runs] == [run2, run1]  # no extra run after the restart
    assert resumed
    assert run2 in resumed[0]["crawl_ids"]
    assert (diff["from_crawl"], diff["to_crawl"]) == (run1, run2)
    assert diff["pages_added"] == added
    assert diff["counts"]["new_broken"] == 0
    assert first_report["summary"]["pages"] == 3
