"""Servers as they really are (issue 14), each case on both backends.

HEAD answers confirmed by GET, a site behind a session cookie, Crawl-delay
of a host the crawl only checks, and a page sent without a Content-Type.
Every server is on loopback and counts the requests it gets.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import time

import asyncpg  # type: ignore[import-untyped]
import pytest
from aiohttp import web

from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.models import Discovered, Outcome, Result, ResultClass, UrlKind
from crawler.report import json as json_report
from crawler.store import open as store_open

from kit.crawlkit import crawl
from kit.pgkit import run_async
from kit.realsites import BehaviourServer, UntypedServer, cookie_gate, html, lying_head


def url_result_column(db: str, url: str, column: str) -> object:
    """One column of the ``url_result`` view for ``url``, on either backend."""
    sql = f"SELECT {column} FROM url_result WHERE url = "
    if not store_open.is_postgres_url(db):
        conn = sqlite3.connect(db)
        try:
            return conn.execute(sql + "?", (url,)).fetchone()[0]
        finally:
            conn.close()

    async def read() -> object:
        conn = await asyncpg.connect(db)
        try:
            return await conn.fetchval(sql + "$1", url)
        finally:
            await conn.close()

    return run_async(read())


# -- HEAD confirmed by GET -----------------------------------------------------


async def test_head_404_get_200_is_fine_with_one_get(any_db: str) -> None:
    handler = lying_head(head={"/img.png": 404}, get={"/img.png": 200}, links=["/img.png"])
    async with BehaviourServer(handler) as server:
        data = await crawl(any_db, [server.url("/")])
    assert server.count("/img.png", "HEAD") == 1
    assert server.count("/img.png", "GET") == 1
    assert data.broken == []
    assert data.summary.ok == 2
    overruled = json_report.document(data)["head_overruled"]
    assert overruled == [{"url": server.url("/img.png"), "head_status": 404, "status": 200}]
    assert url_result_column(any_db, server.url("/img.png"), "head_status") == 404


async def test_head_404_get_404_is_broken_with_one_get(any_db: str) -> None:
    handler = lying_head(head={"/gone.png": 404}, get={"/gone.png": 404}, links=["/gone.png"])
    async with BehaviourServer(handler) as server:
        data = await crawl(any_db, [server.url("/")])
    assert server.count("/gone.png", "HEAD") == 1
    assert server.count("/gone.png", "GET") == 1
    assert [b.url for b in data.broken] == [server.url("/gone.png")]
    assert data.head_overruled == []
    assert url_result_column(any_db, server.url("/gone.png"), "head_status") is None


@pytest.mark.parametrize("head_status", [403, 405, 500, 501])
async def test_other_head_refusals_are_confirmed_too(any_db: str, head_status: int) -> None:
    handler = lying_head(head={"/a": head_status}, get={"/a": 200}, links=["/a"])
    async with BehaviourServer(handler) as server:
        data = await crawl(any_db, [server.url("/")], max_retries=0)
    assert server.count("/a", "GET") == 1
    assert data.broken == []


async def test_after_a_disagreement_the_host_is_asked_with_get_alone(any_db: str) -> None:
    paths = [f"/i{i}.png" for i in range(5)]
    handler = lying_head(head=dict.fromkeys(paths, 404), get=dict.fromkeys(paths, 200), links=paths)
    async with BehaviourServer(handler) as server:
        data = await crawl(any_db, [server.url("/")], host_concurrency=1)
    assert data.broken == []
    assert sum(server.count(p, "HEAD") for p in paths) == 1  # the first one only
    assert all(server.count(p, "GET") == 1 for p in paths)


async def test_a_head_that_asks_to_slow_down_is_not_confirmed(any_db: str) -> None:
    handler = lying_head(head={"/busy": 429}, get={"/busy": 200}, links=["/busy"])
    async with BehaviourServer(handler) as server:
        data = await crawl(any_db, [server.url("/")], max_retries=0)
    assert server.count("/busy", "GET") == 0
    assert [b.status for b in data.broken] == [429]


# -- cookies -------------------------------------------------------------------

GATED_PAGES = 12


@pytest.mark.parametrize("redirect_loop", [False, True], ids=["403", "redirect-loop"])
async def test_a_cookie_gated_site_is_crawled_whole(any_db: str, redirect_loop: bool) -> None:
    async with BehaviourServer(cookie_gate(GATED_PAGES, redirect_loop=redirect_loop)) as server:
        data = await crawl(any_db, [server.url("/")])
    assert data.broken == []
    assert data.summary.pages == GATED_PAGES + 1
    assert server.count("/consent", "GET") == 0
    sent = {a.cookie for a in server.arrivals if a.path.startswith("/p/")}
    assert sent == {"session=s3cr3t"}


@pytest.mark.parametrize("redirect_loop", [False, True], ids=["403", "redirect-loop"])
async def test_no_cookies_fails_as_before(any_db: str, redirect_loop: bool) -> None:
    async with BehaviourServer(cookie_gate(GATED_PAGES, redirect_loop=redirect_loop)) as server:
        data = await crawl(any_db, [server.url("/")], cookies=False)
    assert {b.url for b in data.broken} == {server.url("/p/0"), server.url("/p/1")}
    assert data.summary.pages == 1
    assert all(a.cookie == "" for a in server.arrivals)


# -- Crawl-delay of a host the crawl only checks --------------------------------

CHECKED_LINKS = 5


async def test_a_checked_hosts_crawl_delay_is_honoured(any_db: str) -> None:
    async def checked(request: web.BaseRequest) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nCrawl-delay: 1\nDisallow: /\n")
        return web.Response(text="ok", content_type="text/plain")

    crawled_pages = [f"/p{i}" for i in range(20)]

    async with BehaviourServer(checked, host="127.0.0.2") as other:
        links = [other.url(f"/ref/{i}") for i in range(CHECKED_LINKS)]

        async def crawled(request: web.BaseRequest) -> web.StreamResponse:
            if request.path == "/":
                return html(*links, *crawled_pages)
            if request.path in crawled_pages:
                return html("/")
            return web.Response(status=404)

        async with BehaviourServer(crawled) as server:
            data = await crawl(any_db, [server.url("/")])
    assert data.broken == []  # Disallow applies to crawling only
    assert data.summary.pages == 1 + len(crawled_pages)
    assert other.count("/robots.txt") == 1
    times = [a.at for a in other.arrivals if a.path.startswith("/ref/")]
    assert len(times) == CHECKED_LINKS
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.9, gaps  # spaced by the host's Crawl-delay (start to arrival)
    # The crawled host proceeded meanwhile: its pages were all fetched before
    # the checked host's last request.
    last_page = max(a.at for a in server.arrivals if a.path in crawled_pages)
    assert last_page < times[-1]


async def test_a_host_with_few_checks_is_not_asked_for_robots(any_db: str) -> None:
    async def checked(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response(text="ok", content_type="text/plain")

    async with BehaviourServer(checked, host="127.0.0.2") as other:
        links = [other.url("/a"), other.url("/b")]

        async def crawled(request: web.BaseRequest) -> web.StreamResponse:
            return html(*links) if request.path == "/" else web.Response(status=404)

        async with BehaviourServer(crawled) as server:
            await crawl(any_db, [server.url("/")])
    assert other.count("/robots.txt") == 0


# -- a page without a Content-Type ---------------------------------------------


async def test_an_untyped_html_page_is_parsed(any_db: str) -> None:
    async with UntypedServer(["/fine", "/gone"]) as server:
        data = await crawl(any_db, [server.url("/")])
    assert url_result_column(any_db, server.url("/"), "content_type") is None
    assert server.count("/fine") == 1
    assert [b.url for b in data.broken] == [server.url("/gone")]
    assert json.loads(json_report.render(data))["summary"]["pages"] == 2  # / and /fine


async def test_an_untyped_body_that_is_not_html_is_not_read() -> None:
    """The sniffing rules in one place: what starts like HTML and what does not."""
    from crawler.sniff import looks_like_html

    assert looks_like_html(b"\t\n <!doctype html><p>")
    assert looks_like_html(b"<HTML>")
    assert looks_like_html(b"<p class=x>")
    assert looks_like_html(b"<!-- c -->")
    assert looks_like_html(b"<a href=x>")
    assert not looks_like_html(b"<abbr>")  # <a must be followed by space or >
    assert not looks_like_html(b"%PDF-1.7 <html>")
    assert not looks_like_html(b"<?xml version='1.0'?><html>")
    assert not looks_like_html(b"")


async def test_a_resumed_crawl_remembers_hosts_whose_head_lied(any_db: str) -> None:
    """The hosts learned from stored results: a resumed run asks them with GET alone."""
    paths = [f"/i{i}.png" for i in range(4)]
    handler = lying_head(head=dict.fromkeys(paths, 404), get=dict.fromkeys(paths, 200), links=[])
    async with BehaviourServer(handler) as server:
        host = server.origin.removeprefix("http://")
        store = store_open.create_crawl(any_db, [server.url("/")], CrawlSettings())
        try:
            links = [Discovered(server.url(p), host, UrlKind.CHECK, "img") for p in paths]
            await store.enqueue(links, time.time())
            (first,) = await store.lease("earlier-run", 1, 60.0, time.time())
            result = Result(ResultClass.OK, status=200, head_status=404)
            assert await store.complete("earlier-run", [Outcome(first, result)], time.time())
        finally:
            store.close()
        job, _ = runner.open_existing(any_db)
        try:
            assert await asyncio.wait_for(job.run(), 60)
        finally:
            job.close()
    assert server.methods() == {"GET": len(paths) - 1}  # robots.txt aside: not a page host
