"""The crawl engine end to end against real loopback servers, on both backends.

Every test runs once on a SQLite file and once on a fresh PostgreSQL database
(``any_db``): everything above the storage interface is the same code.
"""

from __future__ import annotations

import asyncio

import pytest

from crawler.engine import loop

from kit.crawlkit import comparable, crawl
from kit.sitekit import Page, SiteServer, wait_until


def gets(server: SiteServer) -> dict[str, int]:
    """GET requests per path, robots.txt aside (asked once per host)."""
    counts = dict(server.paths_requested("GET"))
    assert counts.pop("/robots.txt", 1) == 1
    return counts


async def test_every_form_of_a_url_is_requested_once(site_server, any_db: str) -> None:
    forms = [
        "/~t",
        "/%7Et",
        "/%7et",
        "./~t",
        "x/../~t",
        "/~t#frag",
        "/~t?",
        "/./~t",
        "{origin}/~t",
        "{upper}/~t",
        "/%7E%74",
    ]
    site = {"/": Page(links=[f"/p{i}" for i in range(200)])}
    server = await site_server(site)
    upper = server.origin.upper().replace("HTTP://", "HTTP://")
    for i in range(200):
        form = forms[i % len(forms)].format(origin=server.origin, upper=upper)
        site[f"/p{i}"] = Page(links=[form, "/shared.css"], assets=["/img.png"])
    site["/~t"] = Page()
    data = await crawl(any_db, [server.url("/")], max_concurrency=64, host_concurrency=64)
    counts = server.paths_requested()
    assert counts["/~t"] == 1
    heads = server.paths_requested("HEAD")  # a HEAD 404 is confirmed by one GET
    assert heads["/img.png"] == 1
    assert max(heads.values()) == 1, heads.most_common(3)
    assert max(gets(server).values()) == 1, gets(server).most_common(3)
    assert data.summary.pages == 202


@pytest.mark.parametrize(
    "site",
    [
        pytest.param({"/": Page()}, id="single-page-no-links"),
        pytest.param(
            {"/": Page(links=["/a"]), "/a": Page(links=["/b"]), "/b": Page(links=["/"])}, id="cycle"
        ),
        pytest.param(
            {
                f"/{i}" if i else "/": Page(links=[f"/{j}" for j in range(1, 30)] + ["/"])
                for i in range(30)
            },
            id="complete-graph",
        ),
    ],
)
async def test_crawl_terminates(site_server, any_db: str, site) -> None:
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")])
    assert data.crawl.state == "finished"
    assert data.summary.pages == len(site)
    assert all(n == 1 for n in gets(server).values())


async def test_page_with_5000_links_terminates(site_server, any_db: str) -> None:
    links = [f"/r{i}.png" for i in range(5000)]
    site = {"/": Page(links=links[:2500], assets=links[2500:])}
    for link in links[::2]:
        site[link] = Page(content_type="image/png", body=b"png")
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")], max_concurrency=64, host_concurrency=64)
    assert data.summary.links == 5001
    assert data.summary.broken == 2500
    # every link once, HEAD or GET, robots.txt, and a GET confirming each HEAD 404
    assert len(server.records) == 5001 + 1 + 1250


def _mixed_site(other: SiteServer) -> dict[str, Page]:
    site: dict[str, Page] = {"/": Page(links=[f"/s{i}" for i in range(40)])}
    for i in range(40):
        links = [f"/s{(i * 7 + 3) % 40}", f"/s{(i + 1) % 40}", "/gone", f"/m{i % 5}"]
        if i % 4 == 0:
            links.append(other.url("/ext-ok"))
        if i % 6 == 0:
            links += [other.url("/ext-missing"), "/r1", "mailto:someone@example.org"]
        site[f"/s{i}"] = Page(links=links, assets=["/logo.png", f"/i{i % 3}.png"])
    site["/r1"] = Page(redirect_to="/r2")
    site["/r2"] = Page(redirect_to="/s5")
    site["/logo.png"] = Page(content_type="image/png", body=b"x")
    site["/i0.png"] = Page(content_type="image/png", body=b"x")
    site["/m0"] = Page(redirect_to="/missing-target")
    site["/m1"] = Page(redirect_to="/m1")
    return site


async def test_report_is_identical_at_concurrency_1_and_64(site_server, any_db: str) -> None:
    other = await site_server({"/ext-ok": Page(links=["/never"])}, host="127.0.0.2")
    server = await site_server(_mixed_site(other))
    serial = await crawl(any_db, [server.url("/")], max_concurrency=1)
    parallel = await crawl(any_db, [server.url("/")], max_concurrency=64, host_concurrency=64)
    assert comparable(serial) == comparable(parallel)
    broken = {b.url: b for b in serial.broken}
    assert server.url("/gone") in broken
    assert other.url("/ext-missing") in broken
    assert broken[server.url("/m0")].status == 404  # redirect ending in a 404
    assert "loop" in (broken[server.url("/m1")].error or "") or "itself" in (
        broken[server.url("/m1")].error or ""
    )
    assert server.url("/r1") not in broken
    assert other.paths_requested("GET").get("/never") is None
    assert "/never" not in other.paths_requested()


async def test_out_of_scope_pages_are_checked_not_parsed(site_server, any_db: str) -> None:
    other = await site_server({"/page": Page(links=["/deeper"])}, host="127.0.0.2")
    server = await site_server({"/": Page(links=[other.url("/page")])})
    data = await crawl(any_db, [server.url("/")])
    assert other.requests == [("HEAD", "/page")]
    assert data.summary.broken == 0


async def test_head_refused_falls_back_to_get(site_server, any_db: str) -> None:
    other = await site_server({"/doc": Page(head_status=405)}, host="127.0.0.2")
    server = await site_server({"/": Page(links=[other.url("/doc")])})
    data = await crawl(any_db, [server.url("/")])
    assert other.requests == [("HEAD", "/doc"), ("GET", "/doc")]
    assert data.summary.broken == 0


async def test_host_concurrency_holds_while_other_hosts_proceed(site_server, any_db: str) -> None:
    slow_a = {f"/a{i}": Page(delay_s=0.05) for i in range(24)}
    slow_b = {f"/b{i}": Page(delay_s=0.05) for i in range(24)}
    host_b = await site_server(slow_b, host="127.0.0.2")
    host_a = await site_server(
        {"/": Page(links=list(slow_a) + [host_b.url(p) for p in slow_b]), **slow_a}
    )
    overlap = []

    def watch(server: SiteServer, other: SiteServer) -> None:
        arrive = server._arrive

        def wrapped(*args, **kwargs) -> None:
            arrive(*args, **kwargs)
            overlap.append(server.in_flight + other.in_flight)

        server._arrive = wrapped  # type: ignore[method-assign]

    watch(host_a, host_b)
    watch(host_b, host_a)
    await crawl(any_db, [host_a.url("/")], max_concurrency=32, host_concurrency=2)
    assert host_a.max_in_flight == 2
    assert host_b.max_in_flight == 2
    assert max(overlap) > 2  # the two hosts ran at the same time


async def test_non_http_links_are_skipped_not_broken(site_server, any_db: str) -> None:
    links = ["mailto:a@b.c", "tel:+123", "javascript:void(0)", "data:text/plain,hi", "ftp://x/y"]
    server = await site_server({"/": Page(links=links)})
    data = await crawl(any_db, [server.url("/")])
    assert data.summary.skipped == 5
    assert data.summary.broken == 0


async def test_max_depth_bounds_the_crawl(site_server, any_db: str) -> None:
    site = {
        "/": Page(links=["/1"]),
        "/1": Page(links=["/2"]),
        "/2": Page(links=["/3"]),
        "/3": Page(),
    }
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")], max_depth=1)
    assert gets(server) == {"/": 1, "/1": 1}
    assert server.requests.count(("HEAD", "/2")) == 1  # checked, not crawled
    assert data.summary.pages == 2


async def test_exclude_and_no_follow(site_server, any_db: str) -> None:
    site = {
        "/": Page(links=["/private/x", "/archive/", "/ok"]),
        "/archive/": Page(links=["/archive/old"]),
        "/ok": Page(),
    }
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")], exclude=["/private/"], no_follow=["/archive/"])
    requested = server.paths_requested()
    assert "/private/x" not in requested
    assert requested["/archive/"] == 1
    assert "/archive/old" not in requested
    assert data.summary.excluded == 1


async def test_latin1_page_links_reach_the_right_urls(site_server, any_db: str) -> None:
    body = '<a href="/q?w=caf\xe9">x</a><a href="/caf\xe9">y</a>'.encode("latin-1")
    site = {"/": Page(body=body, content_type="text/html; charset=iso-8859-1")}
    server = await site_server(site)
    await crawl(any_db, [server.url("/")])
    targets = [r.target for r in server.records]
    assert "/q?w=caf%E9" in targets
    assert "/caf%C3%A9" in targets


async def test_second_crawl_keeps_the_first(site_server, any_db: str) -> None:
    server = await site_server({"/": Page(links=["/a"]), "/a": Page()})
    first = await crawl(any_db, [server.url("/")])
    del server.site["/a"]
    second = await crawl(any_db, [server.url("/")])
    assert (first.crawl.id, first.summary.broken) == (1, 0)
    assert (second.crawl.id, second.summary.broken) == (2, 1)


async def test_a_starved_engine_commits_a_page_at_once(
    site_server, any_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the frontier dry and every leased row started, a page's children go in at once.

    The group commit would otherwise wait for more outcomes (up to its
    gathering time, made endless here) while a slow response is out, and the
    free slots would wait with it: the next level starts before /slow answers.
    """
    monkeypatch.setattr(loop, "COMMIT_GATHER_S", 3600.0)
    site = {
        "/": Page(links=["/a", "/slow"]),
        "/a": Page(links=["/b"]),
        "/b": Page(),
        "/slow": Page(delay_s=3600.0),  # answers when the server is told to close
    }
    server = await site_server(site)
    crawling = asyncio.create_task(crawl(any_db, [server.url("/")]))
    try:
        await wait_until(lambda: server.count("/b"), timeout=30, message="/b asked, /slow held")
        assert server.count("/slow") == 1
    finally:
        server._closing.set()  # /slow answers now
        data = await crawling
    assert data.summary.pages == 4
    assert max(gets(server).values()) == 1
