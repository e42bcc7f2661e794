"""Sitemaps are streamed: parsed chunk by chunk as they arrive, never held whole."""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawler.net.sitemaps import SitemapReader, parse

from kit.crawlkit import crawl
from kit.sitekit import Page

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*locs: str) -> bytes:
    entries = "".join(f"<url><loc> {loc} </loc><lastmod>2026-01-01</lastmod></url>" for loc in locs)
    return f'<?xml version="1.0"?><urlset {NS}>{entries}</urlset>'.encode()


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def read(data: bytes, size: int, max_urls: int = 1000) -> SitemapReader:
    reader = SitemapReader(max_urls)
    for chunk in chunks(data, size):
        if not reader.feed(chunk):
            break
    reader.close()
    return reader


@pytest.mark.parametrize("size", [1, 2, 7, 4096])
def test_any_chunking_gives_the_urls_of_the_whole_document(size: int) -> None:
    body = urlset("http://127.0.0.1/a", "http://127.0.0.1/b?x=1&amp;y=2")
    assert read(body, size).pages == ["http://127.0.0.1/a", "http://127.0.0.1/b?x=1&y=2"]
    assert read(gzip.compress(body), size).pages == parse(body)[0]


def test_a_sitemap_index_gives_nested_sitemaps_not_pages() -> None:
    body = (
        f"<sitemapindex {NS}><sitemap><loc>http://127.0.0.1/s1.xml</loc></sitemap>"
        "<sitemap><loc>http://127.0.0.1/s2.xml.gz</loc></sitemap></sitemapindex>"
    ).encode()
    assert parse(body) == ([], ["http://127.0.0.1/s1.xml", "http://127.0.0.1/s2.xml.gz"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html><body>no</body></html>", "root element <html>"),
        (b"<urlset><url><loc>http://127.0.0.1/</loc>", "no element found"),
        (b"", "no element found"),
        (
            b'<!DOCTYPE u [<!ENTITY a "aaaa">]><urlset><url><loc>&a;</loc></url></urlset>',
            "entity declarations are refused",
        ),
        (b"\x1f\x8bnot gzip at all", "invalid gzip"),
    ],
)
def test_unreadable_sitemaps_are_value_errors(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read(body, 3)


def test_the_url_limit_stops_reading() -> None:
    reader = SitemapReader(2)
    body = urlset(*(f"http://127.0.0.1/{n}" for n in range(100)))
    fed = 0
    for chunk in chunks(body, 64):
        fed += 1
        if not reader.feed(chunk):
            break
    reader.close()
    assert reader.pages == ["http://127.0.0.1/0", "http://127.0.0.1/1"]
    assert fed < len(body) // 64  # it asked for no more long before the end


def test_memory_stays_flat_while_a_large_sitemap_streams_through() -> None:
    """32 MB of sitemap (inflated from gzip) go through; the reader's peak stays small."""
    entry = b"<url><lastmod>2026-01-01T00:00:00+00:00</lastmod></url>" * 1000
    reader = SitemapReader(10)
    tracemalloc.start()
    try:
        reader.feed(f"<urlset {NS}>".encode())
        for _ in range(32 * 1024 * 1024 // len(entry)):
            assert reader.feed(entry)
        reader.feed(b"<url><loc>http://127.0.0.1/last</loc></url></urlset>")
        reader.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reader.pages == ["http://127.0.0.1/last"]
    assert peak < 4 * 1024 * 1024


def test_a_gzip_bomb_is_refused_without_inflating_it_at_once() -> None:
    bomb = gzip.compress(b"<urlset>" + b" " * (80 * 1024 * 1024))
    reader = SitemapReader(10)
    tracemalloc.start()
    try:
        for chunk in chunks(bomb, 64 * 1024):
            if not reader.feed(chunk):
                break
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    with pytest.raises(ValueError, match="more than"):
        reader.close()
    assert peak < 8 * 1024 * 1024


async def test_a_sitemap_larger_than_the_page_cap_is_read_to_its_end(
    site_server, tmp_path: Path
) -> None:
    """Pages are capped at --max-body-bytes; a sitemap streams past that cap to its last URL."""
    site: dict[str, Page] = {"/": Page(), "/orphan": Page()}
    server = await site_server(site)
    body = f"<urlset {NS}>".encode() + b"<!-- " + b"x" * 100_000 + b" -->"
    body += f"<url><loc>{server.url('/orphan')}</loc></url></urlset>".encode()
    site["/sitemap.xml"] = Page(body=body.decode(), content_type="application/xml")
    data = await crawl(
        tmp_path / "c.db",
        [server.url("/")],
        sitemaps=[server.url("/sitemap.xml")],
        max_body_bytes=4096,
    )
    assert server.count("/orphan") == 1
    assert data.summary.pages == 2


async def test_a_local_site_is_seeded_from_its_sitemap(tmp_path: Path) -> None:
    root = tmp_path / "public"
    root.mkdir()
    (root / "index.html").write_text("<p>home</p>")
    (root / "orphan.html").write_text("<p>orphan</p>")
    (root / "sitemap.xml").write_bytes(urlset("http://local.invalid/orphan.html"))
    data = await crawl(
        tmp_path / "c.db", [str(root)], sitemaps=["http://local.invalid/sitemap.xml"]
    )
    assert data.summary.pages == 2
    assert data.summary.broken == 0
