"""Loopback sites the service tests crawl."""

from __future__ import annotations

from kit.sitekit import Page, Site

PNG = b"\x89PNG\r\n\x1a\n"
SLOW_PAGES = 40
SLOW_DELAY_S = 0.25


def small_site() -> Site:
    """Four pages, an image, a redirect and two broken links on two pages."""
    return {
        "/": Page(links=["/a", "/b", "/missing"], assets=["/img.png"]),
        "/a": Page(links=["/b", "/gone", "/old"]),
        "/b": Page(links=["/", "/a"]),
        "/old": Page(redirect_to="/b"),
        "/img.png": Page(body=PNG, content_type="image/png"),
    }


def slow_site() -> Site:
    """A chain of slow pages: a crawl at concurrency 1 lasts ~10 s, long enough to steer."""
    site: Site = {}
    for i in range(SLOW_PAGES):
        links = [f"/p/{i + 1}"] if i + 1 < SLOW_PAGES else []
        site["/" if i == 0 else f"/p/{i}"] = Page(links=[*links, "/nowhere"], delay_s=SLOW_DELAY_S)
    return site


SMALL_BROKEN = {("/missing", "/"), ("/gone", "/a")}


TREE_PAGES = 120
TREE_DELAY_S = 0.04


def tree_site(pages: int = TREE_PAGES) -> Site:
    """A 3-ary tree of pages with cross links, broken links, redirects and images.

    Every other page answers after ``TREE_DELAY_S``, so a crawl at concurrency 2
    lasts a few seconds: long enough to be killed in the middle.
    """

    def page(i: int) -> str:
        return "/" if i == 0 else f"/t/{i}"

    site: Site = {}
    for i in range(pages):
        links = [page(child) for child in range(3 * i + 1, min(3 * i + 4, pages))]
        links += [page((i * 7 + 3) % pages), "/"]
        if i % 10 == 4:
            links.append(f"/missing/{i % 3}")
        if i % 15 == 2:
            links.append(f"/moved/{i % 4}")
        assets = [f"/img/{i % 5}.png"]
        site[page(i)] = Page(links=links, assets=assets, delay_s=TREE_DELAY_S * (i % 2))
    for k in range(4):
        site[f"/moved/{k}"] = Page(redirect_to=page(k * 11 + 1))
    for k in range(5):
        site[f"/img/{k}.png"] = Page(body=PNG, content_type="image/png")
    return site
