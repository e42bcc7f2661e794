"""The private-address guard holds for every kind of request the crawler makes.

``--exclude-all-private`` (the service's default) must keep every request off
private addresses: pages, link checks, redirect hops, robots.txt, sitemaps
from the settings, robots ``Sitemap:`` lines, nested sitemap indexes and
anything sent through an ``HTTP_PROXY``. Each test points the crawler at an
"internal" server on loopback and asserts that the server never saw a request.

Only loopback addresses are used: the "public" site is 127.0.0.2, let through
with ``allow_networks=["127.0.0.2/32"]``; the internal one is 127.0.0.1 (by
literal, by the name ``localhost`` and by the decimal spelling 2130706433) or
``[::1]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from crawler import netguard
from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.errors import FailureKind
from crawler.net import sitemaps
from crawler.net.fetch import Fetcher
from crawler.net.robots import Robots

from kit.crawlkit import crawl
from kit.sitekit import Page, SiteServer, page_html

PUBLIC = "127.0.0.2"
GUARDED = {"exclude_all_private": True, "allow_networks": [f"{PUBLIC}/32"]}


def _sitemap(urls: list[str], *, index: bool = False) -> str:
    outer, inner = ("sitemapindex", "sitemap") if index else ("urlset", "url")
    entries = "".join(f"<{inner}><loc>{url}</loc></{inner}>" for url in urls)
    return f'<{outer} xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</{outer}>'


XML = "application/xml"


@pytest.fixture
async def internal(site_server) -> SiteServer:
    """The server the crawl must never reach: every path it knows answers 200."""
    site = {
        path: Page(body=_sitemap([]), content_type=XML) if path.endswith(".xml") else Page()
        for path in ("/", "/page", "/img.png", "/robots.txt", "/sitemap.xml", "/nested.xml")
    }
    server: SiteServer = await site_server(site, host="127.0.0.1")
    return server


def _spellings(server: SiteServer, path: str) -> list[str]:
    """The internal server's URL as an IP literal, a name and a decimal IPv4."""
    return [
        f"http://127.0.0.1:{server.port}{path}",
        f"http://localhost:{server.port}{path}",
        f"http://2130706433:{server.port}{path}",
    ]


async def test_every_request_kind_is_guarded(site_server, internal, tmp_path: Path) -> None:
    """Pages, checks, redirects, robots.txt, all three sitemap sources: none reaches it."""
    pages = _spellings(internal, "/page")
    public_site = {
        "/": Page(
            links=[*pages, "/redirect-literal", "/redirect-name"],
            assets=_spellings(internal, "/img.png"),
        ),
        "/redirect-literal": Page(redirect_to=pages[0]),
        "/redirect-name": Page(redirect_to=pages[1]),
        "/robots.txt": Page(
            body="".join(f"Sitemap: {url}\n" for url in _spellings(internal, "/sitemap.xml")),
            content_type="text/plain",
        ),
        "/index.xml": Page(
            body=_sitemap(_spellings(internal, "/nested.xml"), index=True), content_type=XML
        ),
        "/listed.xml": Page(body=_sitemap(pages), content_type=XML),
    }
    public = await site_server(public_site, host=PUBLIC)
    seeds = [public.url("/"), f"http://localhost:{internal.port}/"]  # a name: robots.txt too
    data = await crawl(
        tmp_path / "c.db",
        seeds,
        use_sitemaps=True,
        sitemaps=[
            *_spellings(internal, "/sitemap.xml"),
            public.url("/index.xml"),
            public.url("/listed.xml"),
        ],
        **GUARDED,
    )
    assert internal.requests == []
    assert public.count("/robots.txt") == 1
    assert public.count("/index.xml") == 1
    assert public.count("/redirect-literal") == 1
    assert data.summary.excluded + data.summary.broken > 0


async def test_proxy_does_not_bypass_the_guard(
    site_server, internal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With HTTP_PROXY set, names are resolved and checked before the proxy sees them."""
    forwarded: list[str] = []

    async def forward(request: web.Request) -> web.Response:
        target = str(request.url)
        forwarded.append(target)
        async with (
            aiohttp.ClientSession() as session,
            session.get(target, allow_redirects=False) as answer,
        ):
            return web.Response(
                status=answer.status,
                body=await answer.read(),
                headers={"Content-Type": "text/html"},
            )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.3", 0)
    await site.start()
    proxy_port = runner.addresses[0][1]
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.3:{proxy_port}")
        for name in ("NO_PROXY", "no_proxy", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        name_url = f"http://localhost:{internal.port}/page"
        public = await site_server(
            {"/": Page(links=[name_url, "/hop"]), "/hop": Page(redirect_to=name_url)},
            host=PUBLIC,
        )
        data = await crawl(tmp_path / "c.db", [public.url("/")], robots=False, **GUARDED)
    finally:
        await runner.cleanup()
    assert internal.requests == []
    assert forwarded  # the public site was reached through the proxy
    assert not [url for url in forwarded if "localhost" in url]
    assert data.summary.excluded >= 1  # the link by name, refused as a private address


@pytest.fixture
async def ipv6_internal() -> AsyncIterator[tuple[str, list[str]]]:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(text=page_html(), content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "::1", 0)
    await site.start()
    try:
        yield f"http://[::1]:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("kind", ["page", "text", "check", "robots", "sitemaps"])
async def test_the_fetcher_refuses_loopback_for_each_kind(
    kind: str, internal, ipv6_internal, tmp_path: Path
) -> None:
    """The request kinds one by one, straight at the fetcher: IPv4, IPv6, name, decimal."""
    v6_origin, v6_seen = ipv6_internal
    targets = [*_spellings(internal, "/page"), f"{v6_origin}/page"]
    settings = CrawlSettings(exclude_all_private=True, max_retries=0)
    async with Fetcher(settings) as fetcher:
        for number, url in enumerate(targets):
            if kind == "robots":
                job = runner.start(tmp_path / f"{number}.db", [url], settings)  # its store
                try:
                    robots = Robots(fetcher, job.frontier, settings.user_agent)
                    assert await robots.sitemaps(url, "h") == []
                finally:
                    job.close()
                continue
            if kind == "sitemaps":
                assert [batch async for batch in sitemaps.collect(fetcher, [url])] == []
                continue
            request = {
                "page": fetcher.fetch_page,
                "text": fetcher.fetch_text,
                "check": fetcher.check,
            }
            fetched = await request[kind](url)
            # yarl refuses the decimal spelling before any connection: never sent either.
            refused = {FailureKind.PRIVATE_ADDRESS, FailureKind.INVALID_URL}
            assert fetched.failure in refused, (url, fetched.error)
            if "2130706433" not in url:
                assert fetched.failure == FailureKind.PRIVATE_ADDRESS, (url, fetched.error)
    assert internal.requests == []
    assert v6_seen == []


# Pure classification: these addresses are strings only, never connected to.
@pytest.mark.parametrize(
    ("address", "private"),
    [
        ("2002:7f00:1::", True),  # 6to4 wrapping 127.0.0.1
        ("2002:a00:1::1", True),  # 6to4 wrapping 10.0.0.1
        ("2002:808:808::1", False),  # 6to4 wrapping a public IPv4 address
        ("64:ff9b::7f00:1", True),  # NAT64 of 127.0.0.1
        ("::ffff:127.0.0.1", True),  # IPv4-mapped
        ("::1", True),
    ],
)
def test_embedded_ipv4_is_classified_by_the_address_it_carries(address: str, private: bool) -> None:
    assert netguard.is_private_address(address) is private


# Network specifications only parsed, never connected to.
@pytest.mark.parametrize("network", ["0.0.0.0/0", "0.0.0.0/1", "::/0", "2000::/3", "10.0.0.0/7"])
def test_a_network_wide_enough_to_switch_the_guard_off_is_refused(network: str) -> None:
    with pytest.raises(ValueError, match="--allow-private"):
        netguard.check_network(network)
    with pytest.raises(ValueError, match="wider than"):
        CrawlSettings(exclude_all_private=True, allow_networks=[network])


def test_private_networks_can_still_be_allowed() -> None:
    # Parsed only (an operator's --allow-network values), never connected to.
    for network in ("10.0.0.0/8", "192.168.1.7", "fd00::/16", "127.0.0.2/32"):
        netguard.check_network(network)
