"""Who may ask the service what: tokens, Host, proxies, local seeds, credentials, caps,
slow clients.

Every server here is on loopback; the "foreign" names (``crawler.example``,
``evil.example``) only ever appear in a Host header, never as an address.
"""

from __future__ import annotations

import http.client
import json
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from crawler.errors import UsageError
from crawler.service import config as service_config
from crawler.service import openapi
from crawler.service.routes import ROUTES

from kit.reverse_proxy import ReverseProxy
from kit.serve_site import ThreadedSite
from kit.servicekit import TOKEN, Answer, ServiceProcess
from kit.sitekit import Page


def _call(port: int, method: str, path: str, body: Any = None, **headers: str) -> Answer:
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    finally:
        conn.close()


BEARER = {"Authorization": f"Bearer {TOKEN}"}


# -- tokens and reads -----------------------------------------------------------------


def test_reads_need_the_token_unless_public_reads(tmp_path: Path, site: ThreadedSite) -> None:
    with ServiceProcess(tmp_path / "a", ["--allow-private"]) as service:
        for path in ("/crawls", "/metrics", "/crawls/1", "/crawls/1/report"):
            assert service.request("GET", path, auth=False).status == 401, path
        for path in ("/", "/static/app.js", "/healthz", "/readyz", "/openapi.json"):
            assert service.request("GET", path, auth=False).status == 200, path
        assert service.get("/crawls").status == 200
    with ServiceProcess(tmp_path / "b", ["--allow-private", "--public-reads"]) as public:
        assert public.request("GET", "/crawls", auth=False).status == 200
        posted = public.request("POST", "/crawls", {"seeds": [site.url("/")]}, auth=False)
        assert posted.status == 401  # writes still need it


def test_without_a_token_one_is_generated_and_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServiceProcess(data, token=None) as service:
        token_file = data / "token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        assert service.request("GET", "/crawls").status == 401
        assert _call(service.port, "GET", "/crawls", Authorization=f"Bearer {token}").status == 200
    with ServiceProcess(data, token=None) as again:  # the same token after a restart
        assert _call(again.port, "GET", "/crawls", Authorization=f"Bearer {token}").status == 200


def test_a_token_with_a_trailing_newline_matches(tmp_path: Path) -> None:
    with ServiceProcess(tmp_path / "data", token=TOKEN + "\n") as service:
        assert _call(service.port, "GET", "/crawls", **BEARER).status == 200


def test_the_host_check_applies_with_a_token(tmp_path: Path) -> None:
    with ServiceProcess(tmp_path / "data", ["--allowed-host", "crawler.example"]) as service:
        rebound = _call(service.port, "GET", "/crawls", Host="evil.example", **BEARER)
        assert rebound.status == 403
        assert rebound.json()["field"] == "Host"
        assert _call(service.port, "GET", "/healthz", Host="evil.example").status == 403
        named = _call(service.port, "GET", "/crawls", Host="crawler.example:443", **BEARER)
        assert named.status == 200


# -- behind a reverse proxy -------------------------------------------------------------


def test_behind_nginx_defaults_the_default_service_is_not_open(
    tmp_path: Path, site: ThreadedSite
) -> None:
    """nginx's bare proxy_pass makes every request look local: the token still guards."""
    with (
        ServiceProcess(tmp_path / "data", ["--allow-private"], token=None) as service,
        ReverseProxy(service.port, "nginx-default") as proxy,
    ):
        body = {"seeds": [site.url("/")]}
        assert _call(proxy.port, "POST", "/crawls", body, Host="evil.example").status == 401
        assert _call(proxy.port, "GET", "/crawls", Host="evil.example").status == 401


def test_a_tokenless_service_refuses_proxied_requests(tmp_path: Path, site: ThreadedSite) -> None:
    with (
        ServiceProcess(tmp_path / "data", ["--no-token", "--allow-private"], token=None) as service,
        ReverseProxy(service.port, "documented") as proxy,
    ):
        answer = _call(proxy.port, "POST", "/crawls", {"seeds": [site.url("/")]}, Host="localhost")
        assert answer.status == 403
        assert "proxy" in answer.json()["error"]
        assert service.get("/crawls").json()["crawls"] == []


def test_the_documented_proxy_setup(tmp_path: Path, site: ThreadedSite) -> None:
    """README "Behind a reverse proxy": token, --allowed-host, Host and X-Forwarded-For passed."""
    args = ["--allowed-host", "crawler.example", "--allow-private"]
    with (
        ServiceProcess(tmp_path / "data", args) as service,
        ReverseProxy(service.port, "documented") as proxy,
    ):
        body = {"seeds": [site.url("/")], "settings": {"max_retries": 0}}
        assert _call(proxy.port, "POST", "/crawls", body, Host="crawler.example").status == 401
        created = _call(proxy.port, "POST", "/crawls", body, Host="crawler.example", **BEARER)
        assert created.status == 201
        foreign = _call(proxy.port, "GET", "/crawls", Host="evil.example", **BEARER)
        assert foreign.status == 403
        handled = [
            line
            for line in service.log_lines()
            if line.get("event") == "request_handled" and line.get("method") == "POST"
        ]
        assert handled
        assert all(line["client"] == "127.0.0.1" for line in handled)
        assert handled[-1]["forwarded_for"] == "127.0.0.1"


# -- what a crawl may ask for ---------------------------------------------------------------


@pytest.mark.parametrize("seed", ["/", "/etc", ".", "etc", "/no/such/dir", "~"])
def test_seeds_that_are_paths_are_refused_alike(service: ServiceProcess, seed: str) -> None:
    answer = service.request("POST", "/crawls", {"seeds": [seed]})
    assert answer.status == 422
    error = answer.json()["error"]
    assert "--local-root" in error
    assert error.replace(repr(seed), "SEED") == _PATH_REFUSAL


_PATH_REFUSAL = (
    "invalid seeds[0]: seed SEED: not an http(s) URL (local directories are crawled with the "
    "CLI, or under a root the service's operator allows with --local-root)"
)


def test_local_seeds_only_under_an_allowed_root(tmp_path: Path) -> None:
    root = tmp_path / "sites"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "index.html").write_text("<a href='/x'>x</a>")
    (tmp_path / "other").mkdir()
    with ServiceProcess(tmp_path / "data", ["--local-root", str(root)]) as service:
        inside = service.request("POST", "/crawls", {"seeds": [str(root / "docs")]})
        assert inside.status == 201, inside.body
        for seed in (str(tmp_path / "other"), str(root / "docs" / ".." / ".."), "/etc"):
            answer = service.request("POST", "/crawls", {"seeds": [seed]})
            assert answer.status == 422, seed


def test_credentials_in_urls_are_redacted_everywhere(
    service: ServiceProcess, site: ThreadedSite
) -> None:
    seed = site.url("/").replace("http://", "http://alice:s3cret-pw@")
    created = service.create([seed], max_retries=0, sitemaps=[seed + "sitemap.xml"])
    crawl = service.wait_state(created["id"], "finished")
    assert "s3cret" not in json.dumps(crawl)
    assert "***@" in crawl["seeds"][0]
    for fmt in ("json", "html", "text", "csv", "markdown", "jsonl", "sarif", "junit"):
        report = service.get(f"/crawls/{created['id']}/report?format={fmt}")
        assert report.status == 200
        assert b"s3cret" not in report.body, fmt
    assert "s3cret" not in json.dumps(service.get("/crawls").json())
    assert "s3cret" not in service.log


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"max_concurrency": 4096}, "settings.max_concurrency"),
        ({"host_concurrency": 100}, "settings.host_concurrency"),
        ({"hosts": {"a.example": {"concurrency": 500}}}, "settings.hosts.a.example.concurrency"),
    ],
)
def test_operator_caps_what_a_crawl_may_ask(
    tmp_path_factory: pytest.TempPathFactory, settings: dict[str, Any], field: str
) -> None:
    data = tmp_path_factory.mktemp("caps") / "data"
    with ServiceProcess(data) as service:
        answer = service.request(
            "POST", "/crawls", {"seeds": ["https://site.example/"], "settings": settings}
        )
        assert answer.status == 422
        assert answer.json()["field"] == field
        assert "--max-" in answer.json()["error"]


@pytest.mark.parametrize(
    "settings", [{"exclude_all_private": False}, {"allow_networks": ["127.0.0.0/8"]}]
)
def test_the_guard_is_not_silently_overridden(tmp_path: Path, settings: dict[str, Any]) -> None:
    with ServiceProcess(tmp_path / "data") as service:
        answer = service.request(
            "POST", "/crawls", {"seeds": ["https://site.example/"], "settings": settings}
        )
        assert answer.status == 422
        assert answer.json()["field"] == f"settings.{next(iter(settings))}"


def test_crawl_databases_are_private_to_the_service_user(
    service: ServiceProcess, site: ThreadedSite
) -> None:
    created = service.create([site.url("/")], max_retries=0)
    service.wait_state(created["id"], "finished")
    files = [p for p in (service.data_dir / "crawls").iterdir() if p.is_file()]
    assert files
    for path in [*files, service.data_dir / "crawls"]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_the_error_names_the_flag_that_exists() -> None:
    with pytest.raises(UsageError, match="invalid --allow-network: ") as caught:
        service_config.resolve({"allow_networks": ["0.0.0.0/0"]}, environ={})
    assert "--allow-private" in str(caught.value)
    with pytest.raises(UsageError, match="invalid CRAWLER_ALLOW_NETWORKS"):
        service_config.resolve({}, environ={"CRAWLER_ALLOW_NETWORKS": "not-a-network"})


# -- slow clients -------------------------------------------------------------------------


def _slow_clients(port: int, count: int) -> list[socket.socket]:
    """Connections that send half a request line and then nothing."""
    clients = []
    for _ in range(count):
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        client.sendall(b"GET /crawls HTTP/1.1\r\nHo")
        clients.append(client)
    return clients


def test_healthz_answers_with_more_slow_clients_than_connections(tmp_path: Path) -> None:
    args = ["--max-connections", "20", "--read-timeout", "600"]  # the cap, not the timeout
    with ServiceProcess(tmp_path / "data", args) as service:
        clients = _slow_clients(service.port, 60)
        try:
            for _ in range(5):
                assert service.request("GET", "/healthz", auth=False).status == 200
        finally:
            for client in clients:
                client.close()


def test_a_slow_client_is_dropped_after_the_read_timeout(tmp_path: Path) -> None:
    with ServiceProcess(tmp_path / "data", ["--read-timeout", "1"]) as service:
        (client,) = _slow_clients(service.port, 1)
        client.settimeout(30)  # a bound: the service closes it well before
        try:
            assert client.recv(1024) == b""
        finally:
            client.close()


def test_a_body_sent_too_slowly_is_refused(tmp_path: Path) -> None:
    with ServiceProcess(tmp_path / "data", ["--read-timeout", "1"]) as service:
        client = socket.create_connection(("127.0.0.1", service.port), timeout=30)
        try:
            client.sendall(
                b"POST /crawls HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n".encode()
                + b'{"seeds":'
            )
            answer = client.recv(4096)
            assert answer.startswith(b"HTTP/1.1 408"), answer
        finally:
            client.close()


def test_security_settings_from_the_environment() -> None:
    environ = {"CRAWLER_PUBLIC_READS": "yes", "CRAWLER_ALLOWED_HOSTS": "a.example,b.example"}
    config = service_config.resolve({}, environ=environ)
    assert config.public_reads is True
    assert config.allowed_hosts == ["a.example", "b.example"]
    with pytest.raises(UsageError, match="choose one"):
        service_config.resolve({"no_token": True, "token": TOKEN}, environ={})


def test_openapi_documents_the_guard_on_every_route() -> None:
    paths = openapi.document()["paths"]
    for route in ROUTES:
        operation = paths[route.path][route.method.lower()]
        assert {"403", "405", "500"} <= set(operation["responses"]), route.path
        if route.needs_token:
            assert "401" in operation["responses"], route.path
            assert operation["security"] == [{"bearerAuth": []}]
    open_routes = {route.path for route in ROUTES if not route.needs_token}
    assert open_routes == {"/", "/static/{name}", "/healthz", "/readyz", "/openapi.json"}


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"max_depth": "3"}, "settings.max_depth"),
        ({"max_retries": True}, "settings.max_retries"),
        ({"user_agent": "x\r\nX-Injected: 1"}, "settings.user_agent"),
        ({"sitemaps": ["/etc/passwd"]}, "settings.sitemaps[0]"),
        ({"sitemaps": ["ftp://example.org/sitemap.xml"]}, "settings.sitemaps[0]"),
    ],
)
def test_settings_are_validated_strictly(
    service: ServiceProcess, settings: dict[str, Any], field: str
) -> None:
    answer = service.request(
        "POST", "/crawls", {"seeds": ["https://site.example/"], "settings": settings}
    )
    assert answer.status == 422, answer.body
    assert answer.json()["field"] == field


def test_the_report_names_the_service_crawl_id(service: ServiceProcess, site: ThreadedSite) -> None:
    for _ in range(2):
        created = service.create([site.url("/")], max_retries=0)
        service.wait_state(created["id"], "finished")
    report = service.get(f"/crawls/{created['id']}/report?format=json").json()
    assert report["crawl"]["id"] == created["id"] > 1
    text = service.get(f"/crawls/{created['id']}/report?format=markdown").body.decode()
    assert f"crawl {created['id']}," in text


def test_a_bad_token_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("short\n")
    config = service_config.resolve({"data_dir": str(tmp_path)}, environ={})
    with pytest.raises(UsageError, match=r"invalid token in .*token: must be at least 16"):
        service_config.with_token(config)


def test_a_catastrophic_pattern_does_not_stall_the_service(service: ServiceProcess) -> None:
    """``(a+)+$`` against ``/aaaa…a!``: with Python's re, ~2**40 steps per link on the loop."""
    evil = "/" + "a" * 40 + "!"
    pages = {"/": Page(links=[f"{evil}{n}" for n in range(50)])}
    with ThreadedSite(pages) as evil_site:
        created = service.create([evil_site.url("/")], max_retries=0, exclude=["(a+)+$"])
        assert service.request("GET", "/healthz", auth=False).status == 200
        crawl = service.wait_state(created["id"], "finished")
    assert crawl["progress"]["broken"] == 50  # checked (404), not hung on


def test_patterns_too_big_for_re2_are_refused(service: ServiceProcess) -> None:
    answer = service.request(
        "POST",
        "/crawls",
        {"seeds": ["https://site.example/"], "settings": {"exclude": ["((a{100}){100}){100}"]}},
    )
    assert answer.status == 422
    assert "invalid repetition size" in answer.json()["error"]


def test_a_corrupt_crawl_database_is_a_500_without_paths(
    service: ServiceProcess, site: ThreadedSite
) -> None:
    created = service.create([site.url("/")], max_retries=0)
    service.wait_state(created["id"], "finished")
    (path,) = [
        p for p in (service.data_dir / "crawls").iterdir() if p.name == f"{created['id']}.db"
    ]
    for extra in path.parent.glob(path.name + "-*"):
        extra.unlink()
    path.write_bytes(b"garbage" * 1000)
    answer = service.get(f"/crawls/{created['id']}/report")
    assert answer.status == 500
    assert str(service.data_dir) not in answer.body.decode()
    assert any(line.get("event") == "report_unreadable" for line in service.log_lines())


def test_crawls_are_listed_a_page_at_a_time(tmp_path: Path, site: ThreadedSite) -> None:
    with ServiceProcess(tmp_path / "data", ["--allow-private"]) as service:
        ids = [service.create([site.url("/")], max_retries=0)["id"] for _ in range(5)]
        first = service.get("/crawls?limit=2").json()
        assert [c["id"] for c in first["crawls"]] == ids[::-1][:2]
        assert first["total"] == 5
        second = service.get(first["next"]).json()
        assert [c["id"] for c in second["crawls"]] == ids[::-1][2:4]
        last = service.get(second["next"]).json()
        assert [c["id"] for c in last["crawls"]] == ids[:1]
        assert last["next"] is None
        for bad in ("limit=0", "limit=x", "before=-1", "limit=100000"):
            assert service.get(f"/crawls?{bad}").status == 400, bad


def test_a_local_crawls_report_names_files_from_its_root(tmp_path: Path) -> None:
    root = tmp_path / "sites"
    repo = root / "repo"
    (repo / "docs").mkdir(parents=True)
    line = "See [the guide](docs/guide.md) and [gone](gone.md)."
    (repo / "README.md").write_text(f"# Repo\n\n{line}\n")
    (repo / "docs" / "guide.md").write_text("Back [home](../README.md#repo).\n")
    with ServiceProcess(tmp_path / "data", ["--local-root", str(root)]) as service:
        created = service.create([str(repo)], include_fragments=True)
        service.wait_state(created["id"], "finished")
        report = service.get(f"/crawls/{created['id']}/report?format=json").json()
    assert [(b["url"], b["sources"]) for b in report["broken"]] == [
        ("gone.md", [f"README.md:3:{line.index('gone.md') + 1}"])
    ]
    assert "local.invalid" not in json.dumps(report)
