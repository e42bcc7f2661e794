"""Where in its source document each link was written: line and column, from the raw text.

The parser (selectolax/lexbor) does not expose source positions. At crawl
time ``locate`` finds them cheaply: the extractor gives the links' values in
document order, and each is looked for in the decoded text from where the
previous one was found (a C-speed ``str.find`` with a boundary check), so a
page costs one forward pass. A value the text writes with character
references (``&amp;``, Sphinx's ``&#64;`` for "@") is found by its plain
prefix, each candidate decoded; only past a budget of characters read does a
miss fall back to the regex scan below. Offsets
become 1-based line and column only for the links kept, counting newlines
between consecutive offsets (``line_columns``). Columns count Unicode code points
(characters, as editors and SARIF's ``unicodeCodePoints`` do; a tab is one,
a BOM is not in the text); a line ends at LF, CRLF or a lone CR.

``link_positions`` is the older report-time path (a crawl stored before
positions were): one regex pass over the raw text: every URL-bearing attribute (``href``, ``src``,
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
import string
from collections.abc import Iterator
from typing import NamedTuple

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


_BEFORE = frozenset("\"'=(, \t\n\r\f")  # what may precede a link's value in the source
_AFTER = frozenset("\"'>), \t\n\r\f;")  # what may follow it


# Bounds that keep a hostile page linear: full-text searches that find nothing
# (a value written with character references, or nowhere), and candidates
# rejected by the boundary check in one search (a value that is a common
# substring). Past them a link simply has no position.
MAX_MISSES = 64
MAX_CANDIDATES = 256
# A value written with character references is searched by its leading plain
# characters, at least this many (fewer would match everywhere); those searches
# read at most this many characters a page (linear, as the scan they spare;
# the scan costs hundreds of times more a character than ``str.find``).
MIN_PLAIN_PREFIX = 4
ESCAPED_BUDGET_PER_CHAR = 16
ESCAPED_BUDGET = 65_536
_PLAIN = string.ascii_letters + string.digits + ":/._~-"  # never escaped in practice
_PLAIN_CHARS = frozenset(_PLAIN)
_PLAIN_RUN = re.compile(f"[{re.escape(_PLAIN)}]+")
_UNQUOTED_END = re.compile(r"[\s>]")


def locate(text: str, values: list[str]) -> list[int]:
    """The offset where each value (in document order) is written in ``text``; -1 if not found.

    Searched forward from the previous value's start, then (a parser may move
    an element, as HTML's foster parenting does) from the start; a value must
    stand alone (quotes, ``=``, ``(``, ``,`` or whitespace around it), so
    ``/a`` is not found inside ``/docs/a``. A value the page writes with
    character references ("&amp;", "&#64;") is searched by its plain prefix,
    each candidate's attribute decoded (``_find_escaped``); once the page has
    shown it escapes a character, values holding one are searched that way
    first. Those searches read a bounded number of characters; past them, the
    first miss has the page's attribute values scanned once (``raw_links``,
    character references decoded), and values are looked up there first.
    Never raises; linear in the text and the links.
    """
    found: list[int] = []
    cursor = 0
    scanned: dict[str, list[int]] | None = None
    misses = 0
    budget = ESCAPED_BUDGET_PER_CHAR * len(text) + ESCAPED_BUDGET
    escaped: frozenset[str] = frozenset()  # characters this page writes as references
    find, end = text.find, len(text)
    for value in values:
        if escaped and budget > 0 and scanned is None and not escaped.isdisjoint(value):
            at, budget = _find_escaped(text, value, cursor, budget)
            if at >= 0:
                cursor = at + 1
                found.append(at)
                continue
        # The common case inline: the next occurrence, standing alone.
        at = find(value, cursor) if value and scanned is None else -1
        if at >= 0:
            after = at + len(value)
            if (at == 0 or text[at - 1] in _BEFORE) and (after == end or text[after] in _AFTER):
                cursor = at + 1
                found.append(at)
                continue
        at = -1
        offsets = scanned.get(value) if scanned is not None else None
        if offsets:
            at = offsets[bisect.bisect_left(offsets, cursor) % len(offsets)]
        elif value and (misses < MAX_MISSES or scanned is None):
            if misses < MAX_MISSES:
                at = _find_written(text, value, cursor)
                if at < 0 and budget > 0:
                    at, budget = _find_escaped(text, value, cursor, budget)
                    if at < 0:
                        at, budget = _find_escaped(text, value, 0, budget)
                if at < 0:
                    misses += 1
                    at = _find_written(text, value, 0)
                if at >= 0 and not text.startswith(value, at):
                    # Written with references: values holding these are searched decoded first.
                    escaped |= frozenset(value).difference(_PLAIN_CHARS)
            if at < 0 and scanned is None:
                scanned = _scan(text)
                offsets = scanned.get(value)
                if offsets:
                    at = offsets[bisect.bisect_left(offsets, cursor) % len(offsets)]
        if at >= 0:
            cursor = at + 1
        found.append(at)
    return found


def _find_written(text: str, value: str, start: int) -> int:
    """``_find``, then (for a value with "&") the value as most pages write it, "&amp;"."""
    at = _find(text, value, start)
    if at < 0 and "&" in value:
        at = _find(text, value.replace("&", "&amp;"), start)
    return at


def _find_escaped(text: str, value: str, start: int, budget: int) -> tuple[int, int]:
    """Where an attribute's whole value, character references decoded, is ``value``;
    and what is left of ``budget`` (characters read).

    Candidates are the places its leading run of plain characters (never
    escaped in practice) stands alone; each candidate's attribute value is
    read to its closing quote and decoded. -1 when the value does not start
    with such a run, or the budget runs out.
    """
    prefix = _PLAIN_RUN.match(value)
    plain = prefix.group() if prefix else ""
    if len(plain) < MIN_PLAIN_PREFIX or plain == value:
        return -1, budget
    longest = 10 * len(value) + 16  # every character escaped, and some spaces
    at = text.find(plain, start)
    budget -= (at if at >= 0 else len(text)) - start
    while at > 0 and budget > 0:
        before = text[at - 1]
        if before in _BEFORE:
            if before in "\"'":
                stop = text.find(before, at, at + longest)
            else:
                unquoted = _UNQUOTED_END.search(text, at, at + longest)
                stop = unquoted.start() if unquoted else -1
            budget -= (stop if stop >= 0 else at + longest) - at
            if stop >= 0 and html.unescape(text[at:stop]).strip() == value:
                return at, budget
        following = text.find(plain, at + 1)
        budget -= (following if following >= 0 else len(text)) - at
        at = following
    return -1, budget


def _find(text: str, value: str, start: int) -> int:
    size, end = len(value), len(text)
    at = text.find(value, start)
    for _ in range(MAX_CANDIDATES):
        if at < 0:
            return -1
        after = at + size
        if (at == 0 or text[at - 1] in _BEFORE) and (after == end or text[after] in _AFTER):
            return at
        at = text.find(value, at + 1)
    return -1


def _scan(text: str) -> dict[str, list[int]]:
    """Every attribute and CSS link value, unescaped and stripped -> its offsets, in order."""
    scanned: dict[str, list[int]] = {}
    for item in raw_links(text):
        value = html.unescape(item.value)
        lead = len(value) - len(value.lstrip())
        scanned.setdefault(value.strip(), []).append(item.offset + lead)
    return scanned


def line_columns(text: str, offsets: list[int]) -> list[tuple[int, int]]:
    """1-based (line, column) of each character offset; cheapest in increasing order.

    Counts LF between consecutive offsets (C loops, no table of lines); a text
    with a lone CR (no LF after it) goes through ``LineIndex`` instead.
    """
    if "\r" in text and text.count("\r") != text.count("\r\n"):  # `in` is a memchr
        index = LineIndex(text)
        return [index.position(offset) for offset in offsets]
    found = []
    count, rfind = text.count, text.rfind
    line, last, start = 1, 0, 0  # start: offset of the current line's first character
    for offset in offsets:
        if offset < last:
            line, last, start = 1, 0, 0
        if newlines := count("\n", last, offset):
            line += newlines
            start = rfind("\n", last, offset) + 1
        last = offset
        found.append((line, offset - start + 1))
    return found


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
        fragment = urls.decoded_fragment(fragment)
        where = index.position(found.offset)
        positions.setdefault(key, where)
        if fragment:
            positions.setdefault(f"{key}#{fragment}", where)
    return positions
