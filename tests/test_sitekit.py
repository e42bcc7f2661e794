"""Tests of the loopback test-server kit itself (tests/kit/sitekit.py)."""

from __future__ import annotations

import asyncio
import html
import os
import time
from html.parser import HTMLParser

import aiohttp
import pytest

from kit.sitekit import (
    BIG_HTML_FIRST_LINK,
    BIG_HTML_LAST_LINK,
    DEEP_LINK,
    LATIN1_HREFS,
    MISLABELLED_HREF,
    HostileServer,
    Page,
    SiteServer,
    page_html,
    wait_until,
    wait_until_sync,
)

SHORT = aiohttp.ClientTimeout(total=5)


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.decl: list[str] = []
        self.tags: list[str] = []
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_decl(self, decl: str) -> None:
        self.decl.append(decl)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"] or "")
        if tag == "img" and a.get("src"):
            self.srcs.append(a["src"] or "")
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


def parse(text: str) -> _Collect:
    p = _Collect()
    p.feed(text)
    p.close()
    return p


@pytest.fixture
async def session():
    async with aiohttp.ClientSession(timeout=SHORT) as s:
        yield s


# --------------------------------------------------------------------------- SiteServer


def test_page_html_is_a_real_document():
    doc = parse(page_html(["/a", "/b?x=1&y=2", 'q"uote'], ["/img.png"], title="T"))
    assert doc.decl == ["DOCTYPE html"]
    assert doc.tags[:4] == ["html", "head", "meta", "title"]
    assert doc.title == "T"
    assert "body" in doc.tags
    assert doc.hrefs == ["/a", "/b?x=1&y=2", 'q"uote']
    assert doc.srcs == ["/img.png"]


async def test_serves_generated_html_and_counts(site_server, session):
    server = await site_server({"/": Page(links=["/a", "/b"], assets=["/logo.png"]), "/a": Page()})
    assert server.url("/x") == f"http://127.0.0.1:{server.port}/x"
    assert server.host == f"127.0.0.1:{server.port}"
    assert server.origin == f"http://127.0.0.1:{server.port}"

    async with session.get(server.url("/")) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        doc = parse(await r.text())
    assert doc.hrefs == ["/a", "/b"]
    assert doc.srcs == ["/logo.png"]

    for _ in range(3):
        async with session.get(server.url("/a")) as r:
            assert r.status == 200
    async with session.get(server.url("/b")) as r:
        assert r.status == 404
    async with session.head(server.url("/a")) as r:
        assert r.status == 200

    assert server.requests == [
        ("GET", "/"),
        ("GET", "/a"),
        ("GET", "/a"),
        ("GET", "/a"),
        ("GET", "/b"),
        ("HEAD", "/a"),
    ]
    assert server.count("/a") == 4
    assert server.count("/a", method="GET") == 3
    assert server.count("/a", method="HEAD") == 1
    assert server.count("/b") == 1
    assert server.count("/nope") == 0
    assert server.paths_requested() == {"/": 1, "/a": 4, "/b": 1}
    assert server.paths_requested("HEAD") == {"/a": 1}
    assert server.records[0].host == server.host
    assert "User-Agent" in server.records[0].headers
    assert server.in_flight == 0


async def test_query_paths_are_distinct_resources(site_server, session):
    server = await site_server({"/a?x=1": Page(body="one"), "/q?w=caf%C3%A9": Page(body="cafe")})
    async with session.get(server.url("/a?x=1")) as r:
        assert (r.status, await r.text()) == (200, "one")
    async with session.get(server.url("/a")) as r:
        assert r.status == 404
    async with session.get(server.url("/a?x=2")) as r:
        assert r.status == 404
    # yarl sends the non-ASCII query percent-encoded; lookup and count see them as equal.
    async with session.get(server.url("/q?w=café")) as r:
        assert (r.status, await r.text()) == (200, "cafe")
    assert server.count("/q?w=café") == 1
    assert server.count("/a?x=1") == 1
    assert server.count("/a") == 1


async def test_verbatim_body_headers_status(site_server, session):
    server = await site_server(
        {
            "/bytes": Page(body=b"\x00\x01", content_type="application/octet-stream"),
            "/latin": Page(body="é", content_type="text/plain; charset=iso-8859-1"),
            "/err": Page(status=500, headers={"X-Test": "yes"}),
            "/empty": Page(status=204),
        }
    )
    async with session.get(server.url("/bytes")) as r:
        assert r.headers["Content-Type"] == "application/octet-stream"
        assert await r.read() == b"\x00\x01"
    async with session.get(server.url("/latin")) as r:
        assert await r.read() == b"\xe9"
    async with session.get(server.url("/err")) as r:
        assert r.status == 500
        assert r.headers["X-Test"] == "yes"
    async with session.get(server.url("/empty")) as r:
        assert r.status == 204
        assert await r.read() == b""


async def test_redirects(site_server, session):
    server = await site_server(
        {
            "/old": Page(redirect_to="/new"),
            "/temp": Page(redirect_to="/new", status=307),
            "/new": Page(),
        }
    )
    async with session.get(server.url("/old"), allow_redirects=False) as r:
        assert r.status == 301
        assert r.headers["Location"] == "/new"
    async with session.get(server.url("/temp"), allow_redirects=False) as r:
        assert r.status == 307
    async with session.get(server.url("/old")) as r:
        assert r.status == 200
        assert str(r.url) == server.url("/new")
    assert server.count("/old") == 2
    assert server.count("/new") == 1


async def test_head_status_override(site_server, session):
    server = await site_server({"/h": Page(head_status=405)})
    async with session.head(server.url("/h")) as r:
        assert r.status == 405
    async with session.get(server.url("/h")) as r:
        assert r.status == 200
    assert server.count("/h", "HEAD") == 1
    assert server.count("/h", "GET") == 1


async def test_max_in_flight_counts_concurrent_requests(site_server, session):
    server = await site_server({"/slow": Page(delay_s=0.5)})

    async def fetch() -> int:
        async with session.get(server.url("/slow")) as r:
            await r.read()
            return r.status

    tasks = [asyncio.create_task(fetch()) for _ in range(5)]
    await wait_until(lambda: server.in_flight == 5, timeout=2, message="5 requests in flight")
    assert await asyncio.gather(*tasks) == [200] * 5
    assert server.max_in_flight == 5
    assert server.in_flight == 0
    assert server.count("/slow") == 5


async def test_site_is_mutable_at_run_time(site_server, session):
    server = await site_server({})
    async with session.get(server.url("/later")) as r:
        assert r.status == 404
    server.site["/later"] = Page(body="here now")
    async with session.get(server.url("/later")) as r:
        assert (r.status, await r.text()) == (200, "here now")
    assert server.count("/later") == 2


async def test_servers_on_several_loopback_addresses(site_server, session):
    a = await site_server({"/": Page(body="A")})
    b = await site_server({"/": Page(body="B")}, host="127.0.0.2")
    c = await site_server({"/": Page(body="C")})  # same address, another port
    assert b.url() == f"http://127.0.0.2:{b.port}/"
    assert a.port != c.port
    for server, expected in ((a, "A"), (b, "B"), (c, "C")):
        async with session.get(server.url()) as r:
            assert await r.text() == expected
        assert server.count("/") == 1
    assert b.records[0].host == f"127.0.0.2:{b.port}"


async def test_close_does_not_wait_for_slow_pages(session):
    server = await SiteServer({"/slow": Page(delay_s=30)}).start()
    task = asyncio.create_task(session.get(server.url("/slow")))
    await wait_until(lambda: server.in_flight == 1)
    started = time.monotonic()
    await server.close()
    assert time.monotonic() - started < 3
    resp = await task  # answered early because the server is closing
    resp.release()


# --------------------------------------------------------------------------- waiting helpers


async def test_wait_until_returns_value_or_raises():
    assert await wait_until(lambda: 42) == 42

    async def coro_pred() -> str:
        return "yes"

    assert await wait_until(coro_pred) == "yes"
    with pytest.raises(AssertionError, match="never true"):
        await wait_until(lambda: False, timeout=0.05, message="never true")
    assert wait_until_sync(lambda: [1]) == [1]
    with pytest.raises(AssertionError, match="condition not met"):
        wait_until_sync(lambda: 0, timeout=0.05)


def test_crawler_env_is_clean(monkeypatch):
    assert not [k for k in os.environ if k.startswith("CRAWLER_")]
    monkeypatch.setenv("CRAWLER_LEAK_CHECK", "1")
    os.environ["CRAWLER_DIRECT_LEAK"] = "1"


def test_crawler_env_is_clean_afterwards():
    assert "CRAWLER_LEAK_CHECK" not in os.environ
    assert "CRAWLER_DIRECT_LEAK" not in os.environ


# --------------------------------------------------------------------------- HostileServer


async def test_url_picks_the_right_port(hostile_server):
    h = hostile_server
    assert h.port != h.raw_port
    assert h.origin == f"http://127.0.0.1:{h.port}"
    assert h.url("endless") == h.origin + "/endless"
    assert h.url("/chain/5") == h.origin + "/chain/5"
    assert h.url("silent") == h.raw_origin + "/silent"
    assert h.url("huge-headers?single=1") == h.raw_origin + "/huge-headers?single=1"


async def test_endless_streams_until_client_leaves(hostile_server, session):
    async with session.get(hostile_server.url("endless")) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/html")
        assert "Content-Length" not in r.headers
        got = 0
        while got < 1024 * 1024:
            got += len(await r.content.read(64 * 1024))
    await wait_until(lambda: hostile_server.in_flight == 0, timeout=5)
    assert hostile_server.count("/endless") == 1


async def test_drip_sends_one_byte_per_interval(hostile_server, session):
    async with session.get(hostile_server.url("drip")) as r:
        assert await r.content.read(1) == b"<"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(r.content.read(1), 0.3)
    started = time.monotonic()
    async with session.get(hostile_server.url("drip?interval=0.05&bytes=5")) as r:
        assert await r.read() == b"<...."
    assert time.monotonic() - started >= 0.2
    assert hostile_server.count("/drip") == 1


async def test_redirect_loop(hostile_server, session):
    async with session.get(hostile_server.url("loop-a"), allow_redirects=False) as r:
        assert (r.status, r.headers["Location"]) == (302, "/loop-b")
    with pytest.raises(aiohttp.TooManyRedirects):
        async with session.get(hostile_server.url("loop-a"), max_redirects=6):
            pass
    # aiohttp gives up on the 6th redirect response: 6 requests after the first probe.
    assert hostile_server.count("/loop-a") == 1 + 3
    assert hostile_server.count("/loop-b") == 3


async def test_redirect_chain(hostile_server, session):
    async with session.get(hostile_server.url("chain/50"), max_redirects=51) as r:
        assert r.status == 200
        assert len(r.history) == 50
        assert str(r.url).endswith("/chain/0")
    assert sum(n for p, n in hostile_server.paths_requested().items() if "chain" in p) == 51
    with pytest.raises(aiohttp.TooManyRedirects):
        async with session.get(hostile_server.url("chain/50")):
            pass


@pytest.mark.parametrize(("name", "encoding"), [("bad-gzip", "gzip"), ("bad-brotli", "br")])
async def test_bad_content_encoding(hostile_server, name, encoding):
    async with (
        aiohttp.ClientSession(timeout=SHORT, auto_decompress=False) as raw,
        raw.get(hostile_server.url(name)) as r,
    ):
        assert r.headers["Content-Encoding"] == encoding
        assert len(await r.read()) > 16
    async with aiohttp.ClientSession(timeout=SHORT) as decoding:
        with pytest.raises(aiohttp.ClientError):
            async with decoding.get(hostile_server.url(name)) as r:
                await r.read()
    assert hostile_server.count("/" + name) == 2


async def test_bad_chunked(hostile_server, session):
    with pytest.raises(aiohttp.ClientError, match="chunk size"):
        async with session.get(hostile_server.url("bad-chunked")) as r:
            await r.read()
    assert hostile_server.count("/bad-chunked") == 1


async def test_reset_after_partial_body(hostile_server, session):
    async with session.get(hostile_server.url("reset")) as r:
        assert r.status == 200
        assert r.headers["Content-Length"] == "100000"
        with pytest.raises(aiohttp.ClientPayloadError):
            await r.read()
    assert hostile_server.count("/reset") == 1


@pytest.mark.parametrize("query", ["", "?single=1"])
async def test_huge_headers(hostile_server, session, query):
    with pytest.raises(aiohttp.ClientResponseError):
        async with session.get(hostile_server.url("huge-headers" + query)):
            pass
    # The server really sends ~1 MiB of headers.
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", hostile_server.raw_port, limit=4 * 1024 * 1024
    )
    try:
        writer.write(f"GET /huge-headers{query} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    finally:
        writer.close()
        await writer.wait_closed()
    assert len(head) > 1_000_000
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert hostile_server.count("/huge-headers" + query) == 2


async def test_big_html_is_streamed_at_the_requested_size(hostile_server, session):
    async with session.get(hostile_server.url("big-html")) as r:
        assert r.headers["Content-Length"] == "100000000"
        first = await r.content.readexactly(1024 * 1024)
    assert first.startswith(b"<!DOCTYPE html>")
    async with session.get(hostile_server.url("big-html?size=300000")) as r:
        body = await r.read()
    assert len(body) == 300_000
    hrefs = parse(body.decode()).hrefs
    assert hrefs == [BIG_HTML_FIRST_LINK, BIG_HTML_LAST_LINK]
    await wait_until(lambda: hostile_server.in_flight == 0, timeout=5)


async def test_deep_nesting(hostile_server, session):
    async with session.get(hostile_server.url("deep")) as r:
        body = await r.read()
    assert body.count(b"<div>") == 100_000
    assert body.count(b"</div>") == 100_000
    inner = body.index(f'<a href="{DEEP_LINK}">'.encode())
    assert body[inner - 5 : inner] == b"<div>"
    assert body[:inner].count(b"<div>") == 100_000
    async with session.get(hostile_server.url("deep?depth=3")) as r:
        assert (await r.read()).count(b"<div>") == 3


async def test_latin1_page(hostile_server, session):
    async with session.get(hostile_server.url("latin1")) as r:
        assert r.headers["Content-Type"] == "text/html; charset=windows-1252"
        raw = await r.read()
        text = await r.text()
    assert b"q=caf\xe9" in raw
    assert b"\x80uro" in raw  # euro sign in windows-1252
    assert parse(text).hrefs == list(LATIN1_HREFS)
    assert html.escape(LATIN1_HREFS[1]) in text


async def test_mislabelled_page(hostile_server, session):
    async with session.get(hostile_server.url("mislabelled")) as r:
        assert r.headers["Content-Type"] == "text/html; charset=iso-8859-1"
        raw = await r.read()
        as_labelled = await r.text()
    assert MISLABELLED_HREF.encode("utf-8") in raw
    assert MISLABELLED_HREF not in as_labelled
    assert MISLABELLED_HREF.encode("utf-8").decode("latin-1") in as_labelled


async def test_silent_never_answers(hostile_server, session):
    with pytest.raises(TimeoutError):
        async with session.get(
            hostile_server.url("silent"), timeout=aiohttp.ClientTimeout(total=0.3)
        ):
            pass
    assert hostile_server.count("/silent") == 1
    await wait_until(lambda: hostile_server.in_flight == 0, timeout=5)


async def test_planted_link_targets_and_unknown_paths(hostile_server, session):
    async with session.get(hostile_server.origin + DEEP_LINK) as r:
        assert r.status == 200
    async with session.get(hostile_server.url("no-such-thing")) as r:
        assert r.status == 404
    async with session.get(hostile_server.raw_origin + "/no-such-thing") as r:
        assert r.status == 404
    assert hostile_server.count("/no-such-thing") == 2


async def test_hostile_close_stops_long_behaviours(session):
    hostile = await HostileServer().start()
    responses = [
        await session.get(hostile.url("endless")),
        await session.get(hostile.url("drip")),
    ]
    silent = asyncio.create_task(session.get(hostile.url("silent")))
    await wait_until(lambda: hostile.in_flight == 3)
    started = time.monotonic()
    await hostile.close()
    assert time.monotonic() - started < 3
    with pytest.raises(aiohttp.ClientError):
        await silent
    for r in responses:
        r.release()
