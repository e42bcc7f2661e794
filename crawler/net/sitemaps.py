"""Sitemaps: seed a crawl from a sitemap or sitemap index (gzip too), parsed safely.

The XML is untrusted: defusedxml refuses entity expansion and external
references, a gzip body is inflated only up to a cap, and the number of
sitemap files and URLs read is bounded, so a hostile sitemap costs a bounded
amount of memory and time. A sitemap that cannot be read is logged and
skipped; the crawl goes on from its other seeds.
"""

from __future__ import annotations

import zlib
from xml.etree.ElementTree import Element, ParseError

import structlog
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from crawler.net.fetch import Fetcher

log = structlog.get_logger(__name__)
MAX_SITEMAPS = 1000
MAX_URLS = 1_000_000
MAX_INFLATED_BYTES = 64 * 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"


async def collect(fetcher: Fetcher, sitemap_urls: list[str], max_urls: int = MAX_URLS) -> list[str]:
    """Page URLs listed by these sitemaps, following sitemap indexes."""
    queue = list(sitemap_urls)
    seen: set[str] = set()
    found: list[str] = []
    while queue and len(seen) < MAX_SITEMAPS and len(found) < max_urls:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        fetched = await fetcher.fetch_text(url)
        if fetched.failure is not None or fetched.body is None or fetched.status != 200:
            log.warning("sitemap_unreadable", url=url, status=fetched.status, error=fetched.error)
            continue
        try:
            pages, nested = parse(fetched.body)
        except ValueError as exc:
            log.warning("sitemap_invalid", url=url, error=str(exc))
            continue
        queue.extend(nested)
        found.extend(pages[: max_urls - len(found)])
    return found


def parse(body: bytes) -> tuple[list[str], list[str]]:
    """(page URLs, nested sitemap URLs) of one sitemap file; ValueError if unreadable."""
    if body.startswith(GZIP_MAGIC):
        body = inflate(body)
    try:
        root = fromstring(body)
    except (ParseError, DefusedXmlException) as exc:
        raise ValueError(f"not a readable sitemap: {exc}") from exc
    kind = _local(root.tag)
    if kind == "sitemapindex":
        return [], _locs(root, "sitemap")
    if kind == "urlset":
        return _locs(root, "url"), []
    raise ValueError(f"not a sitemap: root element <{kind}>")


def inflate(body: bytes) -> bytes:
    """Gunzip, refusing more than ``MAX_INFLATED_BYTES`` (a gzip bomb)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, MAX_INFLATED_BYTES)
    except zlib.error as exc:
        raise ValueError(f"invalid gzip: {exc}") from exc
    if inflater.unconsumed_tail:
        raise ValueError(f"inflates to more than {MAX_INFLATED_BYTES} bytes")
    return data


def _locs(root: Element, entry: str) -> list[str]:
    urls = []
    for child in root:
        if _local(child.tag) != entry:
            continue
        for field in child:
            if _local(field.tag) == "loc" and field.text and field.text.strip():
                urls.append(field.text.strip())
    return urls


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
