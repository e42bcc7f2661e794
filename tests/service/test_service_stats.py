"""Per-host statistics, exclusion reasons, and a seed refused as private shown as such.

``GET /crawls/{id}/stats`` on the site of every failure (``test_service_numbers``):
requests, failures and status classes per host, and why URLs were not
requested. A seed whose name resolves to a private address is refused by the
guard at connect time: the crawl fails with that reason (it used to finish
green with 0 pages), the report lists the seed as broken, and the CLI exits 1.
``test_service_postgres`` runs the statistics on PostgreSQL too.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from test_service_numbers import CLOSED_PORT_URL, failing  # failing: a fixture

from crawler.store.crawl_stats import CHECKED_ONLY

from kit.clikit import run_cli
from kit.serve_site import ThreadedSite
from kit.service_sites import small_site

__all__ = ["failing"]
from kit.servicekit import ServiceProcess


def test_stats_count_requests_per_host_and_exclusions_by_reason(
    service: ServiceProcess, failing: ThreadedSite
) -> None:
    crawl_id = service.create(
        [failing.url("/")], max_retries=0, timeout_s=1.0, exclude=["/private/"]
    )["id"]
    service.wait_state(crawl_id, "finished", timeout=60)
    answer = service.get(f"/crawls/{crawl_id}/stats")
    assert answer.status == 200, answer.body
    stats = answer.json()
    hosts = {h["host"]: h for h in stats["hosts"]}
    site = hosts[failing.url("/").split("/")[2]]
    assert site["status_2xx"] >= 2
    assert site["status_3xx"] >= 3  # /old and the loop
    assert site["status_4xx"] >= 2  # /missing, /gone
    assert site["status_5xx"] == 1
    assert site["no_response"] >= 1  # /slow timed out
    assert site["failures"] == site["status_5xx"] + site["no_response"]
    assert site["requests"] == sum(
        site[k] for k in ("status_2xx", "status_3xx", "status_4xx", "status_5xx", "no_response")
    )
    assert site["mean_latency_ms"] is not None
    closed = hosts[CLOSED_PORT_URL.split("/")[2]]
    assert (closed["requests"], closed["failures"], closed["no_response"]) == (1, 1, 1)
    reasons = {e["reason"]: e["count"] for e in stats["exclusions"]}
    assert reasons["excluded pattern"] == 1
    assert reasons["not http(s) (mailto:, tel:, ...)"] == 1
    assert reasons[CHECKED_ONLY] >= 2  # the image, the other host
    assert stats["refused_seeds"] == []
    assert service.get("/crawls/999999/stats").status == 404
    paths = service.get("/openapi.json").json()["paths"]
    assert "200" in paths["/crawls/{crawl_id}/stats"]["get"]["responses"]


def _loopback_name() -> str:
    """A name (not localhost) this machine resolves to loopback only, for the guard to refuse."""
    for name in (socket.gethostname(), "vm", "runsc", "ip6-localhost", "ip6-loopback"):
        try:
            found = {info[4][0] for info in socket.getaddrinfo(name, 80)}
        except OSError:
            continue
        if found and all(a.startswith("127.") or a == "::1" for a in found):
            return name
    pytest.skip("no name other than localhost resolves to loopback here")


@pytest.fixture
def internal() -> ThreadedSite:
    with ThreadedSite(small_site()) as server:
        yield server  # type: ignore[misc]


def test_a_seed_refused_as_private_fails_the_crawl_and_says_why(
    tmp_path: Path, internal: ThreadedSite
) -> None:
    port = internal.origin.rsplit(":", 1)[1]
    seed = f"http://{_loopback_name()}:{port}/"
    with ServiceProcess(tmp_path / "data") as guarded:  # the guard on: no --allow-private
        crawl_id = guarded.create([seed])["id"]
        crawl = guarded.wait_state(crawl_id, "finished", "failed", timeout=60)
        assert crawl["state"] == "failed"
        assert crawl["error"].startswith("seed refused: ")
        assert "private address" in crawl["error"]
        assert crawl["progress"]["pages"] == 0
        assert crawl["progress"]["broken"] == 1
        stats = guarded.get(f"/crawls/{crawl_id}/stats").json()
        assert [s["url"] for s in stats["refused_seeds"]] == [seed]
        report = guarded.get(f"/crawls/{crawl_id}/report?format=json").json()
        assert [b["url"] for b in report["broken"]] == [seed]
        assert "private address" in report["broken"][0]["error"]
    assert internal.requests() == []  # refused before connecting


def test_the_cli_exits_1_for_a_seed_refused_as_private(
    tmp_path: Path, internal: ThreadedSite
) -> None:
    seed = internal.url("/")  # 127.0.0.1: a literal, refused before connecting
    done = run_cli("crawl", seed, "-E", "--db", tmp_path / "c.db", "-f", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "private address" in done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["broken"] == 1
    assert internal.requests() == []
