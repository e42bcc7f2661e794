"""Sitemaps: seed a crawl from a sitemap or sitemap index (gzip too), streamed and parsed safely.

A sitemap may be 50 MB of XML listing 50,000 URLs, and a hostile one more:
it is never held whole. The body is handed to ``SitemapReader`` chunk by chunk
as it arrives; a gzip body is inflated incrementally, and an expat parser
turns each closing ``<loc>`` into a URL, so memory holds one chunk and the
URLs of the file being read, never its bytes. The XML is untrusted: entity
declarations are refused (no billion laughs), external entities are never
fetched, the inflated size is capped (a gzip bomb), and the number of sitemap
files and URLs read is bounded. A sitemap that cannot be read is logged and
skipped; the crawl goes on from its other seeds.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from xml.parsers import expat

import structlog

from crawler.net.fetch import Fetcher

log = structlog.get_logger(__name__)
MAX_SITEMAPS = 1000
MAX_URLS = 1_000_000
MAX_INFLATED_BYTES = 64 * 1024 * 1024
MAX_LOC_CHARS = 64 * 1024  # a longer <loc> is no URL any server accepts
GZIP_MAGIC = b"\x1f\x8b"
INFLATE_CHUNK = 256 * 1024


async def collect(
    fetcher: Fetcher, sitemap_urls: list[str], max_urls: int = MAX_URLS
) -> AsyncIterator[list[str]]:
    """Page URLs listed by these sitemaps, one batch per sitemap file, following indexes."""
    queue = list(sitemap_urls)
    seen: set[str] = set()
    found = 0
    while queue and len(seen) < MAX_SITEMAPS and found < max_urls:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        reader = SitemapReader(max_urls - found)
        fetched = await fetcher.fetch_stream(url, reader.feed, cap=MAX_INFLATED_BYTES)
        if fetched.failure is not None or fetched.status != 200:
            log.warning("sitemap_unreadable", url=url, status=fetched.status, error=fetched.error)
            continue
        try:
            reader.close()
        except ValueError as exc:
            log.warning("sitemap_invalid", url=url, error=str(exc))
            continue
        queue.extend(reader.nested)
        if reader.pages:
            found += len(reader.pages)
            yield reader.pages


def parse(body: bytes) -> tuple[list[str], list[str]]:
    """(page URLs, nested sitemap URLs) of one whole sitemap file; ValueError if unreadable."""
    reader = SitemapReader(MAX_URLS)
    reader.feed(body)
    reader.close()
    return reader.pages, reader.nested


class SitemapReader:
    """An incremental sitemap parser: ``feed`` chunks, then ``close``.

    ``feed`` returns False once the reader wants no more bytes (the URL limit
    is reached, or the document is already known to be bad); ``close`` raises
    ValueError for a document that is not a readable sitemap. URLs are in
    ``pages`` (a ``<urlset>``) or ``nested`` (a ``<sitemapindex>``).
    """

    def __init__(self, max_urls: int) -> None:
        self.pages: list[str] = []
        self.nested: list[str] = []
        self._max_urls = max_urls
        self._error: str | None = None
        self._full = False
        self._head = b""  # the first bytes, until gzip or not is known
        self._inflater: zlib._Decompress | None = None
        self._decided = False
        self._inflated = 0
        self._kind: str | None = None
        self._path: list[str] = []
        self._text: list[str] = []
        self._text_chars = 0
        self._parser = expat.ParserCreate(namespace_separator="}")
        self._parser.StartElementHandler = self._start
        self._parser.EndElementHandler = self._end
        self._parser.CharacterDataHandler = self._chars
        self._parser.EntityDeclHandler = self._refuse_entity
        self._parser.UnparsedEntityDeclHandler = self._refuse_entity
        self._parser.ExternalEntityRefHandler = self._refuse_external
        self._parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def feed(self, data: bytes) -> bool:
        """Take the next chunk of the body; False when no more is wanted."""
        if self._error is not None or self._full:
            return False
        try:
            self._feed(data)
        except zlib.error as exc:
            self._error = f"invalid gzip: {exc}"
        except (ValueError, expat.ExpatError) as exc:
            self._error = str(exc)
        return self._error is None and not self._full

    def close(self) -> None:
        """End of body: ValueError when it was not a readable sitemap."""
        if self._error is None and not self._full:
            try:
                if not self._decided:
                    self._parse_held(self._decide())
                if self._inflater is not None:
                    self._parse(self._inflater.flush())
                self._parser.Parse(b"", True)
            except zlib.error as exc:
                self._error = f"invalid gzip: {exc}"
            except (ValueError, expat.ExpatError) as exc:
                self._error = str(exc)
        if self._error is not None:
            raise ValueError(f"not a readable sitemap: {self._error}")
        if self._kind is None:
            raise ValueError("not a readable sitemap: no root element")

    def _feed(self, data: bytes) -> None:
        if not self._decided:
            self._head += data
            if len(self._head) < len(GZIP_MAGIC):
                return
            data = self._decide()
        self._parse_held(data)

    def _parse_held(self, data: bytes) -> None:
        inflater = self._inflater
        if inflater is None:
            self._parse(data)
            return
        while data and not self._full:  # inflated a bounded piece at a time: no bomb in memory
            self._parse(inflater.decompress(data, INFLATE_CHUNK))
            data = inflater.unconsumed_tail

    def _decide(self) -> bytes:
        """Gzip or plain XML, from the first bytes; returns what was held back."""
        self._decided = True
        if self._head.startswith(GZIP_MAGIC):
            self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        data, self._head = self._head, b""
        return data

    def _parse(self, data: bytes) -> None:
        self._inflated += len(data)
        if self._inflated > MAX_INFLATED_BYTES:
            raise ValueError(f"more than {MAX_INFLATED_BYTES} bytes")
        if data:
            self._parser.Parse(data, False)

    def _start(self, tag: str, attributes: dict[str, str]) -> None:
        del attributes
        name = _local(tag)
        if self._kind is None:
            if name not in ("urlset", "sitemapindex"):
                raise ValueError(f"root element <{name}>")
            self._kind = name
        self._path.append(name)
        if name == "loc":
            self._text.clear()
            self._text_chars = 0

    def _chars(self, text: str) -> None:
        if self._path and self._path[-1] == "loc" and self._text_chars <= MAX_LOC_CHARS:
            self._text.append(text)
            self._text_chars += len(text)

    def _end(self, tag: str) -> None:
        del tag
        name = self._path.pop()
        if name != "loc" or len(self._path) != 2 or self._full:
            return
        entry = "url" if self._kind == "urlset" else "sitemap"
        url = "".join(self._text).strip()
        self._text.clear()
        if self._path[1] != entry or not url or self._text_chars > MAX_LOC_CHARS:
            return
        if self._kind == "sitemapindex":
            if len(self.nested) < MAX_SITEMAPS:
                self.nested.append(url)
            return
        self.pages.append(url)
        if len(self.pages) >= self._max_urls:
            self._full = True

    @staticmethod
    def _refuse_entity(*_: object) -> None:
        raise ValueError("entity declarations are refused")

    @staticmethod
    def _refuse_external(*_: object) -> int:
        raise ValueError("external entities are refused")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
