"""Where in its source document each link was written: line and column, from the raw text.

The parser (selectolax/lexbor) does not expose source positions, and the crawl
does not need them: only a report pointing at a file does. So positions are
found afterwards, for the few documents that have broken links, by one regex
pass over the raw text: every URL-bearing attribute (``href``, ``src``,
``srcset``, ``data``, ``poster``, ``content`` of a refresh…) and every CSS
``url()``/``@import`` yields its value and the offset where the value starts;
a table of line starts turns offsets into 1-based line and column (columns in
Unicode code points, SARIF's ``unicodeCodePoints``). Values are resolved and
normalized as the crawl did, so a link is matched by the key it was stored
under. Pure: text in, positions out.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Iterator
from typing import NamedTuple
from urllib.parse import unquote

from crawler import urls
from crawler.errors import InvalidURLError
from crawler.patterns import Substitution
from crawler.scope import remapped

Remaps = tuple[tuple[Substitution, str], ...]

_ATTR = re.compile(
    r"""(?<![\w-])(href|src|srcset|data|poster|content|action|formaction|background)"""
    r"""\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""",
    re.IGNORECASE,
)
_CSS = re.compile(
    r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s"']*))\s*\)|@import\s+(?:"([^"]*)"|'([^']*)')""",
    re.IGNORECASE,
)
_BASE = re.compile(r"""<base\b[^>]*?\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
_REFRESH_URL = re.compile(r"""url\s*=\s*['"]?([^'"]+)""", re.IGNORECASE)
_SRCSET_ITEM = re.compile(r"\s*([^\s,][^\s]*)(?:\s+[^,]*)?(?:,|$)")


class Position(NamedTuple):
    """A 1-based line and column."""

    line: int
    column: int


class Found(NamedTuple):
    """A raw link value and the offset (in characters) where it starts."""

    value: str
    offset: int


def raw_links(text: str) -> Iterator[Found]:
    """Every URL-bearing attribute value and CSS reference, in document order."""
    found = [*_attribute_links(text), *_css_links(text)]
    found.sort(key=lambda item: item.offset)
    yield from found


def _attribute_links(text: str) -> Iterator[Found]:
    for match in _ATTR.finditer(text):
        group = next(g for g in (2, 3, 4) if match.group(g) is not None)
        value, start = match.group(group), match.start(group)
        name = match.group(1).lower()
        if name == "srcset":
            for item in _SRCSET_ITEM.finditer(value):
                if item.group(1):
                    yield Found(item.group(1), start + item.start(1))
        elif name == "content":
            refresh = _REFRESH_URL.search(value)
            if refresh:
                yield Found(refresh.group(1).strip(), start + refresh.start(1))
        else:
            yield Found(value, start)


def _css_links(text: str) -> Iterator[Found]:
    for match in _CSS.finditer(text):
        group = next((g for g in range(1, 6) if match.group(g)), None)
        if group is not None:
            yield Found(match.group(group), match.start(group))


class LineIndex:
    """Offsets to (line, column) by bisecting a table of line starts."""

    def __init__(self, text: str) -> None:
        self._starts = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]

    def position(self, offset: int) -> Position:
        """The 1-based line and column of a character offset."""
        line = bisect.bisect_right(self._starts, offset)
        return Position(line, offset - self._starts[line - 1] + 1)


def link_positions(text: str, page_url: str, remaps: Remaps = ()) -> dict[str, Position]:
    """Normalized link URL (``key`` or ``key#fragment``) -> where it is first written.

    ``remaps`` are the crawl's ``--remap`` rules: a link is stored remapped.
    """
    base = page_url
    base_match = _BASE.search(text)
    if base_match:
        written = next(g for g in base_match.groups() if g is not None)
        try:
            base = urls.resolve(html.unescape(written).strip(), page_url)
        except InvalidURLError:
            base = page_url
    index = LineIndex(text)
    positions: dict[str, Position] = {}
    for found in raw_links(text):
        raw = html.unescape(found.value).strip()
        if not raw or raw.startswith(("javascript:", "mailto:", "data:", "tel:")):
            continue
        try:
            key, fragment = urls.normalize(urls.resolve(raw, base))
            if remaps:
                key = urls.normalize(remapped(remaps, key))[0]
        except (InvalidURLError, ValueError):
            continue
        if "%" in fragment:
            fragment = unquote(fragment)
        where = index.position(found.offset)
        positions.setdefault(key, where)
        if fragment:
            positions.setdefault(f"{key}#{fragment}", where)
    return positions
