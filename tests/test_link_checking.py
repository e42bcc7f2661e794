"""Link-checking features against loopback servers: each would fail without its feature.

Every test runs on both backends (``any_db``); a test that crawls twice does
so in the same database, as a second crawl, and reads the latest report.
"""

from __future__ import annotations

import gzip
import itertools
import time
from pathlib import Path

import structlog
import structlog.testing
from aiohttp import web
from aiohttp.test_utils import TestServer

from kit.crawlkit import crawl
from kit.sitekit import Page, SiteServer, page_html


def broken_urls(data) -> dict[str, list[str]]:
    return {b.url: b.sources for b in data.broken}


async def test_missing_anchor_is_broken_and_existing_is_not(site_server, any_db: str) -> None:
    other = await site_server(
        {"/doc": Page(body='<h2 id="there">x</h2><a name="named">y</a>')}, host="127.0.0.2"
    )
    site = {
        "/": Page(
            links=[
                "/target#present",
                "/target#absent",
                "/target#top",
                "/target#:~:text=hello",
                other.url("/doc#there"),
                other.url("/doc#named"),
                other.url("/doc#nowhere"),
            ]
        ),
        "/target": Page(body='<p id="present">here</p>'),
    }
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")], include_fragments=True)
    assert broken_urls(data) == {
        server.url("/target#absent"): [server.url("/")],
        other.url("/doc#nowhere"): [server.url("/")],
    }
    assert other.requests == [("GET", "/doc")]  # fetched once, with GET, for its anchors
    assert server.count("/target") == 1


async def test_a_fragment_is_looked_for_where_its_redirects_end(site_server, any_db: str) -> None:
    """``/old#intro`` -> 301 ``/new``: a browser scrolls to #intro on /new, so it is checked there.

    Before, a link to a redirecting URL had its fragment checked nowhere. The
    same on the site (pages) and off it (checked URLs, fetched with GET for
    their anchors), through one redirect or two.
    """
    anchors = '<h2 id="intro">x</h2>'
    other = await site_server(
        {"/old": Page(redirect_to="/new"), "/new": Page(body=anchors)}, host="127.0.0.2"
    )
    server = await site_server(
        {
            "/": Page(
                links=[
                    "/old#intro",
                    "/old#renamed",
                    "/twice#gone",
                    other.url("/old#intro"),
                    other.url("/old#renamed"),
                ]
            ),
            "/old": Page(redirect_to="/new"),
            "/twice": Page(redirect_to="/old"),
            "/new": Page(body=anchors),
        }
    )
    data = await crawl(any_db, [server.url("/")], include_fragments=True)
    moved = " not found (redirected to {})"
    assert {b.url: (b.status, b.error, b.sources) for b in data.broken} == {
        server.url("/old#renamed"): (
            200,
            "fragment #renamed" + moved.format(server.url("/new")),
            [server.url("/")],
        ),
        server.url("/twice#gone"): (
            200,
            "fragment #gone" + moved.format(server.url("/new")),
            [server.url("/")],
        ),
        other.url("/old#renamed"): (
            200,
            "fragment #renamed" + moved.format(other.url("/new")),
            [server.url("/")],
        ),
    }
    assert other.requests == [("GET", "/old"), ("GET", "/new")]  # each once, /new for anchors
    assert data.summary.broken == 3


async def test_fragments_are_ignored_without_the_option(site_server, any_db: str) -> None:
    server = await site_server({"/": Page(links=["/t#absent"]), "/t": Page()})
    data = await crawl(any_db, [server.url("/")])
    assert data.broken == []


async def test_retry_after_pauses_the_host_and_is_not_broken(any_db: str) -> None:
    arrivals: list[tuple[float, str]] = []
    answered_429 = []

    async def handler(request: web.Request) -> web.Response:
        arrivals.append((time.monotonic(), request.path))
        if request.path == "/":
            return web.Response(
                text=page_html(["/limited", "/a", "/b", "/c"]), content_type="text/html"
            )
        if request.path == "/limited" and len(answered_429) < 2:
            answered_429.append(time.monotonic())
            return web.Response(status=429, headers={"Retry-After": "1"})
        return web.Response(text="ok", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    async with TestServer(app, host="127.0.0.1") as server:
        data = await crawl(
            any_db,
            [str(server.make_url("/"))],
            max_retries=3,
            host_concurrency=1,
            robots=False,
        )
    assert data.broken == []
    assert [path for _, path in arrivals].count("/limited") == 3
    for paused_at in answered_429:
        during = [t for t, _ in arrivals if paused_at < t < paused_at + 0.95]
        assert during == [], "a request reached the host during its Retry-After pause"


async def test_robots_txt_disallowed_pages_are_not_requested(site_server, any_db: str) -> None:
    site = {
        "/robots.txt": Page(body="User-agent: *\nDisallow: /private/\n", content_type="text/plain"),
        "/": Page(links=["/private/secret", "/public"]),
        "/public": Page(),
        "/private/secret": Page(),
    }
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")])
    assert server.count("/private/secret") == 0
    assert server.count("/robots.txt") == 1
    assert data.summary.skipped == 1
    ignored = await crawl(any_db, [server.url("/")], robots=False)
    assert server.count("/private/secret") == 1
    assert ignored.summary.skipped == 0


async def test_a_robots_txt_that_fails_allows_everything_and_says_so(
    site_server, any_db: str
) -> None:
    site = {
        "/robots.txt": Page(status=503, body="busy", content_type="text/plain"),
        "/": Page(links=["/public"]),
        "/public": Page(),
    }
    server = await site_server(site)
    with structlog.testing.capture_logs() as logs:
        data = await crawl(any_db, [server.url("/")], max_retries=0)
    assert server.count("/public") == 1
    assert data.summary.pages == 2
    warned = [e for e in logs if e["event"] == "robots_unavailable"]
    assert [(e["log_level"], e["status"]) for e in warned] == [("warning", 503)]


async def test_meta_and_header_nofollow_stop_discovery(site_server, any_db: str) -> None:
    site = {
        "/": Page(links=["/meta", "/header"]),
        "/meta": Page(body='<meta name="robots" content="noindex, nofollow"><a href="/x1">x</a>'),
        "/header": Page(links=["/x2"], headers={"X-Robots-Tag": "nofollow"}),
    }
    server = await site_server(site)
    await crawl(any_db, [server.url("/")])
    assert server.count("/x1") == 0
    assert server.count("/x2") == 0


async def test_sitemap_seeds_reach_an_orphan_page(site_server, any_db: str) -> None:
    site: dict[str, Page] = {
        "/": Page(),
        "/orphan": Page(links=["/orphan-child"]),
        "/orphan-child": Page(),
    }
    server = await site_server(site)
    urlset = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{server.url('/orphan')}</loc></url></urlset>"
    )
    index = (
        '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{server.url('/pages.xml.gz')}</loc></sitemap></sitemapindex>"
    )
    site["/sitemap.xml"] = Page(body=index, content_type="application/xml")
    site["/pages.xml.gz"] = Page(
        body=gzip.compress(urlset.encode()), content_type="application/gzip"
    )
    data = await crawl(any_db, [server.url("/")], sitemaps=[server.url("/sitemap.xml")])
    assert server.count("/orphan-child") == 1
    assert data.summary.pages == 3


async def test_robots_sitemaps_with_use_sitemaps(site_server, any_db: str) -> None:
    site: dict[str, Page] = {"/": Page(), "/orphan": Page()}
    server = await site_server(site)
    site["/robots.txt"] = Page(body=f"Sitemap: {server.url('/s.xml')}\n", content_type="text/plain")
    site["/s.xml"] = Page(
        body=f"<urlset><url><loc>{server.url('/orphan')}</loc></url></urlset>",
        content_type="application/xml",
    )
    await crawl(any_db, [server.url("/")], use_sitemaps=True)
    assert server.count("/orphan") == 1


async def test_hostile_sitemap_is_skipped_not_fatal(site_server, any_db: str) -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        '<!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><urlset><url><loc>&lol2;</loc></url></urlset>'
    )
    site = {"/": Page(), "/bomb.xml": Page(body=bomb, content_type="application/xml")}
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")], sitemaps=[server.url("/bomb.xml")])
    assert data.crawl.state == "finished"
    assert data.summary.pages == 1


async def test_bot_walls_are_blocked_not_broken(site_server, any_db: str) -> None:
    other = await site_server(
        {
            "/li": Page(status=999),
            "/cf": Page(status=403, headers={"cf-mitigated": "challenge"}),
            "/gone": Page(status=404),
        },
        host="127.0.0.2",
    )
    server = await site_server({"/": Page(links=[other.url(p) for p in ("/li", "/cf", "/gone")])})
    data = await crawl(any_db, [server.url("/")])
    assert list(broken_urls(data)) == [other.url("/gone")]
    assert data.summary.blocked == 2
    strict = await crawl(any_db, [server.url("/")], blocked_as_broken=True)
    assert len(strict.broken) == 3


async def test_accept_ranges(site_server, any_db: str) -> None:
    other = await site_server(
        {"/forbidden": Page(status=403), "/teapot": Page(status=418)}, host="127.0.0.2"
    )
    server = await site_server({"/": Page(links=[other.url("/forbidden"), other.url("/teapot")])})
    data = await crawl(any_db, [server.url("/")], accept=["200..=299, 403"])
    assert list(broken_urls(data)) == [other.url("/teapot")]


async def test_exclude_all_private_skips_private_targets(
    site_server, tmp_path: Path, any_db: str
) -> None:
    server = await site_server({"/x": Page()})
    public = tmp_path / "public"
    public.mkdir()
    by_name = server.url("/x").replace("127.0.0.1", "localhost")
    (public / "index.html").write_text(page_html([server.url("/x"), by_name]))
    data = await crawl(any_db, [str(public)], exclude_all_private=True)
    assert server.requests == []  # neither the IP literal nor the name resolving to it
    assert data.summary.excluded == 2
    assert data.broken == []


async def test_local_directory_is_crawled_as_a_site(
    site_server, tmp_path: Path, any_db: str
) -> None:
    external = await site_server({"/ok": Page()})
    public = tmp_path / "public"
    (public / "docs").mkdir(parents=True)
    (public / "index.html").write_text(
        page_html(
            ["/docs/", "docs/missing.html", external.url("/ok"), external.url("/gone")],
            ["/logo.png"],
        )
    )
    (public / "docs" / "index.html").write_text(page_html(["../index.html", "/nope/"]))
    (public / "logo.png").write_bytes(b"png")
    data = await crawl(any_db, [str(public)])
    broken = broken_urls(data)
    assert set(broken) == {
        "http://local.invalid/docs/missing.html",
        "http://local.invalid/nope/",
        external.url("/gone"),
    }
    assert broken["http://local.invalid/nope/"] == ["http://local.invalid/docs/"]
    assert external.count("/ok") == 1
    assert data.summary.pages == 3  # /, /docs/ and /index.html (a URL of its own)


async def test_max_cache_age_reuses_fine_external_results(site_server, any_db: str) -> None:
    other = await site_server({"/ok": Page(), "/bad": Page(status=500)}, host="127.0.0.2")
    server = await site_server({"/": Page(links=[other.url("/ok"), other.url("/bad")])})
    await crawl(any_db, [server.url("/")])
    assert other.count("/ok") == 1
    assert other.count("/bad", "HEAD") == 1  # (and one GET to confirm the 500)
    second = await crawl(any_db, [server.url("/")], max_cache_age_s=86400)
    assert other.count("/ok") == 1  # reused
    assert other.count("/bad", "HEAD") == 2  # errors are never reused
    assert list(broken_urls(second)) == [other.url("/bad")]
    assert server.count("/") == 2  # pages are always crawled again


async def test_in_scope_css_is_parsed(site_server, any_db: str) -> None:
    site = {
        "/": Page(
            body='<link rel="stylesheet" href="/s.css"><div style="background:url(/a.png)">'
            '<style>@import "/other.css";</style>'
        ),
        "/s.css": Page(body="body{background:url('/img/bg.png')}", content_type="text/css"),
        "/a.png": Page(content_type="image/png", body=b"x"),
        "/other.css": Page(body="", content_type="text/css"),
    }
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")])
    assert server.count("/img/bg.png", "HEAD") == 1  # and one GET confirming its 404
    assert server.count("/a.png") == 1
    assert list(broken_urls(data)) == [server.url("/img/bg.png")]


async def test_basic_auth_and_headers_per_host(any_db: str) -> None:
    seen: list[tuple[str, str | None, str | None]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(
            (request.path, request.headers.get("Authorization"), request.headers.get("X-Team"))
        )
        if request.path == "/":
            return web.Response(text=page_html(["/secret"]), content_type="text/html")
        if request.headers.get("Authorization") != "Basic dXNlcjpwYXNz":
            return web.Response(status=401)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    async with TestServer(app, host="127.0.0.1") as server:
        host = server.make_url("/").host
        data = await crawl(
            any_db,
            [str(server.make_url("/"))],
            robots=False,
            basic_auth=["/secret user:pass"],
            hosts={host: {"headers": {"X-Team": "qa"}}},
        )
    assert data.broken == []
    assert ("/", None, "qa") in seen


async def test_host_request_interval_spaces_requests(site_server, any_db: str) -> None:
    server = await site_server(
        {"/": Page(links=[f"/p{i}" for i in range(5)]), **{f"/p{i}": Page() for i in range(5)}}
    )
    arrivals: list[float] = []
    arrive = server._arrive

    def timed(*args, **kwargs) -> None:
        arrivals.append(time.monotonic())
        arrive(*args, **kwargs)

    server._arrive = timed  # type: ignore[method-assign]
    await crawl(any_db, [server.url("/")], host_request_interval_s=0.1, robots=False)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert len(arrivals) == 6
    assert min(gaps) >= 0.09


async def test_method_get_checks_with_get(site_server, any_db: str) -> None:
    other = await site_server({"/r": Page()}, host="127.0.0.2")
    server = await site_server({"/": Page(links=[other.url("/r")])})
    await crawl(any_db, [server.url("/")], method="get")
    assert other.requests == [("GET", "/r")]


async def test_cookie_jar_is_read_and_written(tmp_path: Path, any_db: str) -> None:
    jar = tmp_path / "cookies.txt"
    jar.write_text("# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tabc\n")
    received: list[str | None] = []

    async def handler(request: web.Request) -> web.Response:
        received.append(request.cookies.get("session"))
        response = web.Response(text="<p>hi</p>", content_type="text/html")
        response.set_cookie("fresh", "xyz")
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    async with TestServer(app, host="127.0.0.1") as server:
        await crawl(any_db, [str(server.make_url("/"))], robots=False, cookie_jar=str(jar))
    assert received == ["abc"]
    assert "fresh" in jar.read_text()


def _unused(_: SiteServer) -> None:  # keep the import for type hints in fixtures
    pass


async def test_allow_network_lets_a_private_network_through(
    site_server, tmp_path: Path, any_db: str
) -> None:
    server = await site_server({"/x": Page(), "/y": Page()})
    public = tmp_path / "public"
    public.mkdir()
    by_name = server.url("/y").replace("127.0.0.1", "localhost")
    (public / "index.html").write_text(page_html([server.url("/x"), by_name]))
    data = await crawl(
        any_db, [str(public)], exclude_all_private=True, allow_networks=["127.0.0.0/8"]
    )
    assert server.count("/x") == 1  # the IP literal
    assert server.count("/y") == 1  # the name, after DNS
    assert data.summary.excluded == 0
