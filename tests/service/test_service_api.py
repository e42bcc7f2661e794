"""The JSON API through real HTTP: crawls, reports, states, errors, the token."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawler import report

from kit.serve_site import ThreadedSite
from kit.service_sites import SMALL_BROKEN
from kit.servicekit import ServiceProcess
from kit.sitekit import wait_until_sync


def _finished_crawl(service: ServiceProcess, site: ThreadedSite) -> dict[str, Any]:
    created = service.create([site.url("/")], max_retries=0)
    return service.wait_state(created["id"], "finished")


def test_a_crawl_runs_to_the_end_with_counters_and_reports(
    service: ServiceProcess, site: ThreadedSite
) -> None:
    created = service.create([site.url("/")], max_retries=0, max_concurrency=4)
    assert created["state"] in ("queued", "running")
    assert created["settings"]["max_concurrency"] == 4

    crawl = service.wait_state(created["id"], "finished")
    progress = crawl["progress"]
    assert progress["pages"] >= 3  # in-scope URLs fetched as pages, 404s included
    assert progress["broken"] == 2
    assert progress["pending"] == progress["leased"] == 0
    assert progress["crawled"] >= 6
    assert crawl["finished_at"] is not None

    answer = service.get(f"/crawls/{created['id']}/report?format=json")
    assert answer.status == 200
    assert answer.content_type == "application/json"
    document = answer.json()
    broken = {
        (link["url"].removeprefix(site.origin), source.removeprefix(site.origin))
        for link in document["broken"]
        for source in link["sources"]
    }
    assert broken == SMALL_BROKEN
    for fmt in report.FORMATS:
        answer = service.get(f"/crawls/{created['id']}/report?format={fmt}")
        assert answer.status == 200, (fmt, answer.body)
        assert answer.body
    text = service.get(f"/crawls/{created['id']}/report?format=text").body.decode()
    assert site.url("/gone") in text


def test_the_list_shows_every_crawl_newest_first(
    service: ServiceProcess, site: ThreadedSite
) -> None:
    first = _finished_crawl(service, site)
    second = _finished_crawl(service, site)
    listing = service.get("/crawls").json()
    ids = [crawl["id"] for crawl in listing["crawls"]]
    assert ids.index(second["id"]) < ids.index(first["id"])
    assert listing["max_running"] == 2


def test_pause_resume_cancel_and_delete(service: ServiceProcess, slow: ThreadedSite) -> None:
    crawl_id = service.create([slow.url("/")], max_concurrency=1, max_retries=0)["id"]
    service.wait_state(crawl_id, "running")
    wait_until_sync(lambda: service.crawl(crawl_id)["progress"]["crawled"] >= 2, 15)

    paused = service.request("POST", f"/crawls/{crawl_id}/pause")
    assert paused.status == 200
    assert paused.json()["state"] in ("pausing", "paused")
    stopped = service.wait_state(crawl_id, "paused")
    assert stopped["progress"]["leased"] == 0  # the engine gave its leases back
    before = slow.request_count()
    assert service.crawl(crawl_id)["state"] == "paused"
    assert slow.request_count() == before

    assert service.request("POST", f"/crawls/{crawl_id}/resume").status == 200
    service.wait_state(crawl_id, "running")
    wait_until_sync(lambda: slow.request_count() > before, 15, message="requests again")

    cancelled = service.request("POST", f"/crawls/{crawl_id}/cancel")
    assert cancelled.status == 200
    service.wait_state(crawl_id, "cancelled")
    assert service.get(f"/crawls/{crawl_id}/report?format=json").status == 200
    resume = service.request("POST", f"/crawls/{crawl_id}/resume")
    assert resume.status == 409
    assert "cancelled" in resume.json()["error"]

    assert service.request("DELETE", f"/crawls/{crawl_id}").status == 204
    assert service.get(f"/crawls/{crawl_id}").status == 404
    assert not (service.data_dir / "crawls" / f"{crawl_id}.db").exists()


def test_deleting_a_running_crawl_stops_it_first(
    service: ServiceProcess, slow: ThreadedSite
) -> None:
    crawl_id = service.create([slow.url("/")], max_concurrency=1)["id"]
    service.wait_state(crawl_id, "running")
    assert service.request("DELETE", f"/crawls/{crawl_id}").status == 204
    assert service.get(f"/crawls/{crawl_id}").status == 404
    assert not list((service.data_dir / "crawls").glob(f"{crawl_id}.db*"))


def test_crawls_beyond_max_running_queue(service: ServiceProcess, slow: ThreadedSite) -> None:
    ids = [service.create([slow.url("/")], max_concurrency=1)["id"] for _ in range(3)]
    service.wait_state(ids[0], "running")
    service.wait_state(ids[1], "running")
    third = service.crawl(ids[2])
    assert third["state"] == "queued"
    assert third["queue_position"] == 1
    listing = service.get("/crawls").json()
    assert listing["running"] == 2
    assert listing["queued"] >= 1

    service.request("POST", f"/crawls/{ids[0]}/pause")
    service.wait_state(ids[2], "running")
    for crawl_id in ids:
        assert service.request("DELETE", f"/crawls/{crawl_id}").status == 204


def test_finished_crawls_refuse_pause_resume_and_cancel(
    service: ServiceProcess, site: ThreadedSite
) -> None:
    crawl_id = _finished_crawl(service, site)["id"]
    for action in ("pause", "resume", "cancel"):
        answer = service.request("POST", f"/crawls/{crawl_id}/{action}")
        assert answer.status == 409, action
        assert "finished" in answer.json()["error"]


# -- bad requests: a 4xx naming the field, never a 500 --------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"seeds": ["http://127.0.0.1:9/"], "bogus": 1}, 422, "bogus"),
        ({"seeds": ["http://127.0.0.1:9/"], "settings": {"bogus": 1}}, 422, "settings.bogus"),
        ({"seeds": "http://127.0.0.1:9/"}, 422, "seeds"),
        ({"seeds": []}, 422, "seeds"),
        ({"seeds": ["ftp://example.org/"]}, 422, "seeds[0]"),
        ({"seeds": ["http://127.0.0.1:9/", "not a url"]}, 422, "seeds[1]"),
        ({"seeds": ["http://127.0.0.1:9/"] * 101}, 422, "seeds"),
        (
            {"seeds": ["http://127.0.0.1:9/"], "settings": {"max_depth": "deep"}},
            422,
            "settings.max_depth",
        ),
        (
            {"seeds": ["http://127.0.0.1:9/"], "settings": {"max_depth": -1}},
            422,
            "settings.max_depth",
        ),
        (
            {"seeds": ["http://127.0.0.1:9/"], "settings": {"max_concurrency": 10**9}},
            422,
            "settings.max_concurrency",
        ),
        (
            {"seeds": ["http://127.0.0.1:9/"], "settings": {"include": ["("]}},
            422,
            "settings.include",
        ),
        (
            {"seeds": ["http://127.0.0.1:9/"], "settings": {"exclude": ["x"] * 101}},
            422,
            "settings.exclude",
        ),
        (
            {"seeds": ["http://127.0.0.1:9/"], "settings": {"scope": "planet"}},
            422,
            "settings.scope",
        ),
        (
            {"seeds": ["http://127.0.0.1:9/"], "settings": {"cookie_jar": "/etc/passwd"}},
            422,
            "settings.cookie_jar",
        ),
        ({"seeds": ["http://127.0.0.1:9/"], "settings": []}, 422, "settings"),
        ([1, 2], 422, None),
        # NUL: no store keeps it in a text (PostgreSQL failed with a 500).
        (
            {"seeds": ["http://127.0.0.1:9/"], "settings": {"headers": {"X-A": "b\x00"}}},
            422,
            "settings.headers.X-A",
        ),
        ({"seeds": ["http://127.0.0.1:9/"], "name": "\x00"}, 422, "name"),
        ({"seeds": ["http://127.0.0.1:9/"], "a\x00": 1}, 422, "a\x00"),
    ],
)
def test_invalid_bodies_name_the_field(
    service: ServiceProcess, body: Any, status: int, field: str | None
) -> None:
    answer = service.request("POST", "/crawls", body)
    assert answer.status == status, answer.body
    error = answer.json()
    assert error["field"] == field
    assert error["error"]
    assert error["details"]


@pytest.mark.parametrize(
    ("raw", "headers", "status"),
    [
        (b'{"seeds": [', {"Content-Type": "application/json"}, 400),
        (b"\xff\xfe", {"Content-Type": "application/json"}, 400),
        (b"", {"Content-Type": "application/json"}, 400),
        (b'{"seeds": []}', {"Content-Type": "text/plain"}, 415),
        (b'{"seeds": []}', {}, 415),
        (b"[" + b'"x",' * 40_000 + b'"x"]', {"Content-Type": "application/json"}, 413),
        # A NUL as deep as the JSON parser goes (the check does not recurse), and deeper.
        (b"[" * 1024 + b'"\\u0000"' + b"]" * 1024, {"Content-Type": "application/json"}, 422),
        (b"[" * 5000 + b'"\\u0000"' + b"]" * 5000, {"Content-Type": "application/json"}, 400),
    ],
)
def test_malformed_requests_get_json_errors(
    service: ServiceProcess, raw: bytes, headers: dict[str, str], status: int
) -> None:
    answer = service.request("POST", "/crawls", raw=raw, headers=headers)
    assert answer.status == status, answer.body
    assert answer.content_type == "application/json"
    assert answer.json()["error"]


def test_a_huge_chunked_body_is_refused(service: ServiceProcess) -> None:
    """No Content-Length: the cap applies while reading."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
    try:
        conn.putrequest("POST", "/crawls")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Authorization", f"Bearer {service.token}")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        chunk = b"[" + b" " * 8190 + b"\n"
        for _ in range(16):
            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        conn.send(b"0\r\n\r\n")
        response = conn.getresponse()
        assert response.status == 413
        assert json.loads(response.read())["error"]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "path",
    ["/crawls/999999", "/crawls/abc", "/crawls/99999999999999999999999999", "/crawls/-1"],
)
def test_unknown_crawls_are_404(service: ServiceProcess, path: str) -> None:
    for method, suffix in [("GET", ""), ("GET", "/report"), ("POST", "/pause"), ("DELETE", "")]:
        answer = service.request(method, path + suffix)
        assert answer.status == 404, (method, path + suffix, answer.body)
        assert answer.json()["field"] == "crawl_id"


def test_a_bad_report_format_names_the_field(service: ServiceProcess, site: ThreadedSite) -> None:
    crawl_id = _finished_crawl(service, site)["id"]
    answer = service.get(f"/crawls/{crawl_id}/report?format=pdf")
    assert answer.status == 400
    assert answer.json()["field"] == "format"


def test_unknown_routes_and_methods_answer_json(service: ServiceProcess) -> None:
    assert service.get("/nowhere").status == 404
    answer = service.request("PUT", "/crawls", {"seeds": []})
    assert answer.status == 405
    assert "POST" in answer.headers["allow"]
    assert answer.json()["error"]


# -- the token and the browser guard ------------------------------------------------------


def test_writes_and_reads_need_the_token(service: ServiceProcess, site: ThreadedSite) -> None:
    body = {"seeds": [site.url("/")]}
    missing = service.request("POST", "/crawls", body, auth=False)
    assert missing.status == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert missing.json()["field"] == "Authorization"
    wrong = service.request(
        "POST", "/crawls", body, headers={"Authorization": "Bearer " + "x" * 26}
    )
    assert wrong.status == 401
    basic = service.request("DELETE", "/crawls/1", headers={"Authorization": "Basic eDp4"})
    assert basic.status == 401
    assert service.request("GET", "/crawls", auth=False).status == 401  # --public-reads opens it
    assert service.request("GET", "/healthz", auth=False).status == 200


def test_cross_origin_writes_are_refused(service: ServiceProcess, site: ThreadedSite) -> None:
    answer = service.request(
        "POST",
        "/crawls",
        {"seeds": [site.url("/")]},
        headers={"Origin": "http://evil.example"},
    )
    assert answer.status == 403
    same = service.request(
        "POST",
        "/crawls",
        {"seeds": [site.url("/")], "settings": {"max_retries": 0}},
        headers={"Origin": f"http://127.0.0.1:{service.port}"},
    )
    assert same.status == 201


# -- operations ----------------------------------------------------------------------------


def test_health_readiness_and_metrics(service: ServiceProcess, site: ThreadedSite) -> None:
    _finished_crawl(service, site)
    assert service.get("/healthz").json() == {"status": "ok"}
    ready = service.get("/readyz")
    assert ready.status == 200
    assert ready.json()["ready"] is True
    metrics = service.get("/metrics")
    assert metrics.status == 200
    assert metrics.content_type == "text/plain"
    text = metrics.body.decode()
    values = _samples(text)
    assert values["crawler_pages_crawled_total"] >= 3
    assert values["crawler_links_checked_total"] >= 6
    assert values["crawler_broken_total"] >= 2
    assert values[f'crawler_host_requests_total{{host="{site.server.host}"}}'] >= 6
    assert values['crawler_crawls{state="finished"}'] >= 1
    for name in (
        "crawler_requests_in_flight",
        'crawler_frontier_urls{state="pending"}',
        "crawler_lease_expiries_total",
        'crawler_crawls{state="running"}',
    ):
        assert name in values, name


def _samples(text: str) -> dict[str, float]:
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_every_log_line_of_a_crawl_carries_its_id(
    service: ServiceProcess, site: ThreadedSite
) -> None:
    crawl_id = _finished_crawl(service, site)["id"]
    events = [line for line in service.log_lines() if line.get("crawl_id") == crawl_id]
    names = {line["event"] for line in events}
    assert {"crawl_created", "crawl_started", "crawl_finished"} <= names
    for line in service.log_lines():
        if line["event"] in ("crawl_started", "crawl_finished", "crawl_stopped"):
            assert "crawl_id" in line, line
    for text in service.log.splitlines():  # one JSON object per line, nothing else
        assert isinstance(json.loads(text), dict), text


def test_a_service_without_allow_private_refuses_internal_seeds(tmp_path: Path) -> None:
    with ServiceProcess(tmp_path / "data", ["--no-token"], token=None) as strict:
        for seed in ("http://127.0.0.1:9/", "http://[::1]/", "http://10.1.2.3/", "http://0x7f.1/"):
            answer = strict.request("POST", "/crawls", {"seeds": [seed]})
            assert answer.status == 422, seed
            assert answer.json()["field"] == "seeds[0]"
            assert "--allow-private" in answer.json()["error"]
        assert strict.get("/crawls").json()["crawls"] == []


def test_without_a_token_only_loopback_host_headers_are_served(tmp_path: Path) -> None:
    """DNS rebinding: a page of attacker.example whose name now points at 127.0.0.1."""
    with ServiceProcess(tmp_path / "data", ["--no-token"], token=None) as open_service:
        assert open_service.get("/crawls").status == 200
        rebound = open_service.request(
            "GET", "/crawls", headers={"Host": f"attacker.example:{open_service.port}"}
        )
        assert rebound.status == 403
        assert rebound.json()["error"]
