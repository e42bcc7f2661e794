"""Links out of documents: decode the bytes, parse once, return raw links.

A pure function of the page's content, as lychee's extractor is: no URL
resolution (that is ``urls.resolve``, given ``Extracted.base_href`` and the
encoding from ``decode_html``), no I/O, no exceptions on hostile input. One
walk of the Lexbor tree visits every element that can carry a link, an
anchor, a base or a robots directive, in document order.
"""

from __future__ import annotations

import bisect
import codecs
import re
from itertools import accumulate
from operator import sub

from selectolax.lexbor import LexborHTMLParser

from crawler.models import Extracted, RawLink

# Larger documents are parsed in pieces of at most PIECE_CHARS, cut between two
# block elements (``_pieces``), or else tokenized: Lexbor's tree costs ~13 bytes
# of memory per byte of HTML (a 2.5 MB page: 33 MB; a piece: 6.5 MB at most,
# half what a page just under the threshold costs).
STREAM_ABOVE_CHARS = 1_000_000
PIECE_CHARS = 500_000
# Elements whose content an HTML parser reads as text, not tags.
TEXT_CONTENT = ("script", "style", "textarea", "title", "xmp", "noembed", "noframes", "iframe")
PRESCAN_BYTES = 1024  # how far into the body <meta charset> is looked for, as WHATWG does
_WHITESPACE = " \t\n\r\f"  # ASCII whitespace as HTML defines it

# Which attributes of which elements hold a URL. <meta> is handled apart.
LINK_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    # SVG's links too: <a>, and <use> and <image> (an icon sprite, a picture) by
    # href or, as most SVG still writes them, xlink:href.
    "a": ("href", "xlink:href"),
    "use": ("href", "xlink:href"),
    "image": ("href", "xlink:href"),
    "area": ("href",),
    "img": ("src", "srcset"),
    "source": ("src", "srcset"),
    "script": ("src",),
    "link": ("href",),
    "iframe": ("src",),
    "frame": ("src",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "embed": ("src",),
    "object": ("data",),
}

MAX_DEPTH = 512  # deeper nesting is flattened before parsing (Blink caps at 512 too)
_DEPTH_CHECK_TAGS = 4096  # fewer tags than this parse fast at any depth
_UNNESTED = (
    "area|base|br|col|embed|hr|img|input|link|meta|source|track|wbr|p|li|dt|dd|option|tr|td|th"
)


def _any_case(names: str) -> str:
    """``names`` ("a|ab|b") as an alternation grouped by first letter, each letter
    a two-case class: the regex engine then tries one branch per tag, where
    ``re.IGNORECASE`` on the flat list tried all of them (3x slower on big pages)."""
    by_first: dict[str, list[str]] = {}
    for name in names.split("|"):
        by_first.setdefault(name[0], []).append(name[1:])

    def cased(text: str) -> str:
        return "".join(f"[{c.lower()}{c.upper()}]" for c in text)

    branches = []
    for first, rests in sorted(by_first.items()):
        tails = sorted(rests, key=len, reverse=True)  # "link" before "li"
        branches.append(cased(first) + "(?:" + "|".join(map(cased, tails)) + ")")
    return "|".join(branches)


_DEPTH_TAG = re.compile(rf"<(/?)(?!(?:{_any_case(_UNNESTED)})[\s/>])[A-Za-z]")
_DEPTH_DELTA = {"": 1, "/": -1}
# Tags per step of the coarse bound in ``_max_depth``.
_DEPTH_STEP = 64
_KEPT = (
    "|".join(LINK_ATTRIBUTES)
    + "|html|head|body|meta|base|frameset|template|noscript"
    + "|style|textarea|title|xmp|noembed|noframes|plaintext"  # raw text: keep its end tag
)
_FLATTEN = re.compile(rf"</?(?!(?:{_KEPT})[\s/>])[A-Za-z][^\s/>]*", re.IGNORECASE)

_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:\-]+)", re.IGNORECASE)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:\-]+)", re.IGNORECASE)
_REFRESH = re.compile(r"[ \t\n\r\f]*[0-9.]+(?:[;, \t\n\r\f][ \t\n\r\f;,]*(.*))?", re.DOTALL)
_REFRESH_URL_PREFIX = re.compile(r"url[ \t\n\r\f]*=[ \t\n\r\f]*", re.IGNORECASE)
_CSS_URL = re.compile(
    r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)"'\s]*))\s*\)|@import\s+(?:"([^"]*)"|'([^']*)')""",
    re.IGNORECASE,
)

# Python codec name -> WHATWG encoding name, for the encodings WHATWG knows.
# WHATWG folds latin-1 and ASCII into windows-1252, and a few others alike.
_WHATWG_NAMES = {
    "utf-8": "utf-8",
    "ascii": "windows-1252",
    "iso8859-1": "windows-1252",
    "iso8859-9": "windows-1254",
    "iso8859-11": "windows-874",
    "tis-620": "windows-874",
    "cp874": "windows-874",
    "koi8-r": "koi8-r",
    "koi8-u": "koi8-u",
    "mac-roman": "macintosh",
    "mac-cyrillic": "x-mac-cyrillic",
    "cp866": "ibm866",
    "gb2312": "gbk",
    "gbk": "gbk",
    "cp936": "gbk",
    "gb18030": "gb18030",
    "big5": "big5",
    "big5hkscs": "big5",
    "cp950": "big5",
    "euc_jp": "euc-jp",
    "iso2022_jp": "iso-2022-jp",
    "shift_jis": "shift_jis",
    "cp932": "shift_jis",
    "euc_kr": "euc-kr",
    "cp949": "euc-kr",
    "utf-16-le": "utf-16le",
    "utf-16-be": "utf-16be",
    "utf-16": "utf-16le",
    **{f"iso8859-{n}": f"iso-8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)},
    **{f"cp125{n}": f"windows-125{n}" for n in range(9)},
}
# WHATWG encoding name -> the Python codec that decodes it (its superset, where
# WHATWG's encoding is wider than the Python one of the same name).
_DECODERS = {
    "windows-1252": "cp1252",
    "windows-874": "cp874",
    "x-mac-cyrillic": "mac-cyrillic",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "shift_jis": "cp932",
    "euc-kr": "cp949",
}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16be"),
    (codecs.BOM_UTF16_LE, "utf-16le"),
)


def encoding_from_label(label: str) -> str | None:
    """The WHATWG encoding name for a charset label, None when unknown."""
    try:
        python_name = codecs.lookup(label.strip(_WHITESPACE).lower()).name
    except (LookupError, ValueError):  # ValueError: a NUL in the label
        return None
    return _WHATWG_NAMES.get(python_name)


def _sniff(body: bytes, content_type: str | None) -> tuple[str, int]:
    """The document's encoding and the length of its BOM, in WHATWG order."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name, len(bom)
    header = _HEADER_CHARSET.search(content_type) if content_type else None
    if header is not None and (header_name := encoding_from_label(header.group(1))):
        return header_name, 0
    for meta in _META_CHARSET.finditer(body, 0, PRESCAN_BYTES):
        if meta_name := encoding_from_label(meta.group(1).decode("ascii")):
            # A page that says UTF-16 in ASCII bytes is not UTF-16.
            return ("utf-8" if meta_name.startswith("utf-16") else meta_name), 0
    return "utf-8", 0


def decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    """Decode a page to text as a browser would; returns ``(text, encoding)``.

    Order: BOM, the Content-Type charset, ``<meta charset>`` in the first
    1024 bytes, else UTF-8. Unknown labels are ignored. Bad bytes become
    U+FFFD, never an error. ``encoding`` is a WHATWG name meant for
    ``urls.resolve``; for UTF-16 documents it is "utf-8", as URLs use.
    """
    name, bom_length = _sniff(body, content_type)
    decoder = _DECODERS.get(name, name)
    try:
        text = body[bom_length:].decode(decoder, errors="replace")
    except (LookupError, UnicodeError):  # defensive: every table entry decodes
        text, name = body.decode("utf-8", errors="replace"), "utf-8"
    return text, ("utf-8" if name.startswith("utf-16") else name)


def parse_srcset(value: str) -> list[str]:
    """The candidate URLs of a srcset, per the HTML parsing rules.

    A URL runs until whitespace, so it may contain commas ("b,c.jpg"); a URL
    ending in commas loses them; descriptors ("2x", "100w") run to the next
    comma outside parentheses.
    """
    urls: list[str] = []
    pos, end = 0, len(value)
    while True:
        while pos < end and (value[pos] in _WHITESPACE or value[pos] == ","):
            pos += 1
        if pos >= end:
            return urls
        start = pos
        while pos < end and value[pos] not in _WHITESPACE:
            pos += 1
        url = value[start:pos]
        if url.endswith(","):
            url = url.rstrip(",")
        else:
            pos = _skip_descriptors(value, pos)
        if url:
            urls.append(url)


def _skip_descriptors(value: str, pos: int) -> int:
    """Position just past the descriptors that follow a srcset URL."""
    depth = 0
    for i in range(pos, len(value)):
        char = value[i]
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif char == "," and not depth:
            return i + 1
    return len(value)


def refresh_url(content: str) -> str | None:
    """The URL of a ``<meta http-equiv=refresh>`` content, None when it has none.

    "5; url=/next", "0;URL='/next'" and "5, /next" all give "/next".
    """
    match = _REFRESH.match(content)
    if match is None or not match.group(1):
        return None
    url = match.group(1)
    if prefix := _REFRESH_URL_PREFIX.match(url):
        url = url[prefix.end() :]
    if url[:1] in ("'", '"'):
        url = url[1:].partition(url[0])[0]
    url = url.strip(_WHITESPACE)
    return url or None


def _robots_nofollow(content: str) -> bool:
    tokens = {token.strip(_WHITESPACE).lower() for token in content.split(",")}
    return "nofollow" in tokens or "none" in tokens


def _max_depth(html: str, at_least: int = 0) -> int:
    """An estimate of the deepest element nesting, from tags alone.

    Void and self-closing-in-practice elements (p, li, td...) do not count; a
    stray end tag never takes the depth below 0. Runs in C loops only. The
    depth is first bounded from every ``_DEPTH_STEP``-th tag (within a step
    it moves by at most the step's length either way); when that bound is
    not above ``at_least``, it is returned, and the tag-by-tag sum is skipped.
    """
    marks = _DEPTH_TAG.findall(html)
    closes = [marks[i : i + _DEPTH_STEP].count("/") for i in range(0, len(marks), _DEPTH_STEP)]
    steps = [_DEPTH_STEP - 2 * c for c in closes]
    if steps:
        steps[-1] -= _DEPTH_STEP - (len(marks) - _DEPTH_STEP * (len(steps) - 1))
    coarse = list(accumulate(steps, initial=0))
    bound = max(map(sub, coarse, accumulate(coarse, min))) + 2 * _DEPTH_STEP
    if bound <= at_least:
        return int(bound)
    prefix = list(accumulate(map(_DEPTH_DELTA.__getitem__, marks), initial=0))
    return int(max(map(sub, prefix, accumulate(prefix, min))))


def _parser(html: str) -> LexborHTMLParser:
    """Parse, guarding against the one input Lexbor is slow on.

    Each block start tag (div, section, ul...) walks the stack of open
    elements, so thousands of unclosed ones cost quadratic time (100,000
    nested divs: 10 s). Past ``MAX_DEPTH``, as browsers cap depth, every tag
    that cannot carry a link becomes a void <br> with its attributes (ids
    stay anchors): same links, flat tree. The rewrite is a regex, so tag-like
    text inside attribute values is rewritten too; only such pages see it.
    """
    return _lexbor(_FLATTEN.sub("<br", html) if _too_deep(html) else html)


def _too_deep(html: str) -> bool:
    return html.count("<") > _DEPTH_CHECK_TAGS and _max_depth(html, MAX_DEPTH) > MAX_DEPTH


def _lexbor(html: str) -> LexborHTMLParser:
    try:
        return LexborHTMLParser(html)
    except UnicodeEncodeError:  # lone surrogates: the parser wants valid UTF-8
        return LexborHTMLParser(html.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))


def extract_links(html: str, limit: int | None = None) -> Extracted:
    """Every link a page holds, in document order, with what changes their meaning.

    Links: a/area href, SVG a/use/image href and xlink:href, img/source src
    and srcset (each candidate), script src, link href (element "stylesheet"
    for rel=stylesheet), iframe/frame src, video src and poster,
    audio/track/embed src, object data, meta refresh content, and
    url()/@import in <style> and style attributes (element "style").
    Values are stripped; empty and whitespace-only values are skipped (an
    empty href only points back to the page itself). Also the first <base
    href>, robots nofollow ("nofollow" or "none"), and the anchors (every id
    and every a[name]). Never raises.
    Documents over ``STREAM_ABOVE_CHARS`` are parsed in pieces of at most
    ``PIECE_CHARS`` (cut between block elements, ``_pieces``), or read by
    ``extract_stream`` (no tree) when they cannot be cut.
    With ``limit``, links past the first ``limit`` are counted in ``dropped``,
    not kept: a page of a million links then costs the memory of ``limit``.
    """
    found = Found(limit)
    if len(html) <= STREAM_ABOVE_CHARS:
        _walk(_parser(html), found)
        return found.extracted()
    pieces = _pieces(html, min(PIECE_CHARS, STREAM_ABOVE_CHARS))
    for start, end in pieces or ():  # one tree at a time
        piece = html[start:end]
        if _too_deep(piece):
            # Flattened pieces can hold a few more formatting elements than the
            # whole document would: such a document is tokenized instead.
            found, pieces = Found(limit), None
            break
        _walk(_lexbor(piece), found)
    if pieces is None:
        from crawler import extract_stream  # html.parser: for the rare huge page only

        extract_stream.read_tags(html, found)
    return found.extracted()


def _walk(parsed: LexborHTMLParser, found: Found) -> None:
    """Every element of the parsed tree, in document order, into ``found``."""
    root = parsed.root
    # One walk in document order; Lexbor's CSS matching costs more than this.
    for node in root.traverse() if root is not None else ():
        attrs = node.attributes
        tag = node.tag or ""
        if tag == "style":
            found.style(node.text(deep=True) or "")
        if attrs:
            found.element(tag, attrs)


# Where a large document may be cut: before a block element's start tag that
# follows a tag's end (whitespace between).
_CUT = re.compile(
    r">[ \t\n\r\f]*(<(?:div|section|article|p|li|dt|dd|h[1-6]|ul|ol|dl|table|hr)[\s/>])",
    re.IGNORECASE,
)
# Cuts are looked for in the last this many characters of a piece first.
_CUT_NEAR_END = 65_536
# ... and not where one of these is open: a comment or raw text (its content is
# not tags), <template> (not in the document), or an element whose content a
# document of its own would read otherwise (rows outside a table are dropped).
_CONTEXT = ("table", "template", "select", "svg", "math")
_OPENINGS = re.compile(
    rf"<!--|-->|<(/?)({'|'.join(TEXT_CONTENT + _CONTEXT)}|plaintext)(?=[\s/>])", re.IGNORECASE
)


def _pieces(html: str, size: int) -> list[tuple[int, int]] | None:
    """Bounds of pieces of at most ``size`` characters that parse, one by one, to the
    elements the whole document holds; None when there is no such cut.

    A piece ends before a block element's start tag (``_CUT``) where no comment,
    raw-text element, table, template, select, svg or math is open: a tree made of
    the next piece alone then holds the same elements with the same attributes.
    Elements open across the cut are closed, and formatting elements are not
    reopened after it, which changes no element's attributes.
    """
    spans = _open_spans(html)
    if spans is None:
        return None
    starts = [first for first, _ in spans]
    bounds = []
    start = 0
    while len(html) - start > size:
        end = start + size
        near = max(start + size // 2, end - _CUT_NEAR_END)
        cut = _last_cut(html, near, end, spans, starts) or _last_cut(
            html, start + size // 2, near, spans, starts
        )
        if cut is None:
            return None
        bounds.append((start, cut))
        start = cut
    bounds.append((start, len(html)))
    return bounds


def _last_cut(
    html: str, lowest: int, highest: int, spans: list[tuple[int, int]], starts: list[int]
) -> int | None:
    """The last ``_CUT`` in [lowest, highest) outside the open spans."""
    cut = None
    for match in _CUT.finditer(html, lowest, highest):
        at = match.start(1)
        span = bisect.bisect_right(starts, at) - 1
        if span < 0 or spans[span][1] <= at:
            cut = at
    return cut


def _open_spans(html: str) -> list[tuple[int, int]] | None:
    """The spans, in order, where a comment, ``TEXT_CONTENT`` or ``_CONTEXT`` element is open
    (from its opening tag to the end of its closing one). None after a <plaintext>:
    the rest of the document is text."""
    spans = []
    opened_at = -1  # where the current span began; -1: none open
    depth = 0  # _CONTEXT elements open
    skipping: str | None = None  # the raw-text element, or "--" for a comment
    for match in _OPENINGS.finditer(html):
        mark, name = match.group(0), (match.group(2) or "").lower()
        closing = bool(match.group(1))
        if skipping is not None:
            if (skipping == "--" and mark == "-->") or (closing and name == skipping):
                skipping = None
        elif mark == "<!--":
            skipping = "--"
        elif name == "plaintext" and not closing:
            return None
        elif name in TEXT_CONTENT and not closing:
            skipping = name
        elif name in _CONTEXT:
            depth = max(0, depth - 1) if closing else depth + 1
        if opened_at < 0 and (skipping is not None or depth > 0):
            opened_at = match.start()
        elif opened_at >= 0 and skipping is None and depth == 0:
            spans.append((opened_at, match.end()))
            opened_at = -1
    if opened_at >= 0:
        spans.append((opened_at, len(html)))
    return spans


class Found:
    """What the elements of one document hold, collected in document order.

    Fed by the Lexbor tree walk and by the streaming tokenizer alike, so both
    read an element the same way.
    """

    __slots__ = ("anchors", "base_href", "dropped", "limit", "links", "nofollow")

    def __init__(self, limit: int | None = None) -> None:
        self.links: list[RawLink] = []
        self.anchors: set[str] = set()
        self.base_href: str | None = None
        self.nofollow = False
        self.limit = limit
        self.dropped = 0

    def element(self, tag: str, attrs: dict[str, str | None]) -> None:
        """One element's links, anchors, base and robots directive."""
        links = self.links
        if anchor := attrs.get("id"):
            self.anchors.add(anchor)
        if inline := attrs.get("style"):
            links.extend(RawLink(url, "style", "style") for url in extract_css_urls(inline))
        if (names := LINK_ATTRIBUTES.get(tag)) is not None:
            if tag == "a" and (name := attrs.get("name")):
                self.anchors.add(name)
            if tag == "link" and "stylesheet" in (attrs.get("rel") or "").lower().split():
                tag = "stylesheet"  # crawled (parsed for url()) when in scope
            _element_links(tag, names, attrs, links)
        elif tag == "meta":
            self.nofollow = _meta(attrs, links) or self.nofollow
        elif tag == "base" and self.base_href is None:
            self.base_href = _stripped(attrs.get("href")) or None
        if self.limit is not None and len(links) > self.limit:
            self._drop()

    def style(self, css: str) -> None:
        """The text of a <style> element."""
        self.links.extend(RawLink(url, "style", "url") for url in extract_css_urls(css))
        if self.limit is not None and len(self.links) > self.limit:
            self._drop()

    def _drop(self) -> None:
        assert self.limit is not None
        self.dropped += len(self.links) - self.limit
        del self.links[self.limit :]

    def extracted(self) -> Extracted:
        return Extracted(
            self.links,
            base_href=self.base_href,
            nofollow=self.nofollow,
            anchors=frozenset(self.anchors),
            dropped=self.dropped,
        )


def _stripped(value: str | None) -> str:
    return value.strip(_WHITESPACE) if value else ""


def _element_links(
    tag: str, names: tuple[str, ...], attrs: dict[str, str | None], links: list[RawLink]
) -> None:
    """Append the links one element holds, skipping empty values."""
    for attribute in names:
        value = attrs.get(attribute)
        if not value or not (value := value.strip(_WHITESPACE)):
            continue
        if attribute == "srcset":
            links.extend([RawLink(url, tag, attribute) for url in parse_srcset(value)])
        else:
            links.append(RawLink(value, tag, attribute))


def _meta(attrs: dict[str, str | None], links: list[RawLink]) -> bool:
    """Record a refresh link; returns whether the meta says robots nofollow."""
    content = attrs.get("content")
    if not content:
        return False
    if _stripped(attrs.get("http-equiv")).lower() == "refresh":
        if url := refresh_url(content):
            links.append(RawLink(url, "meta", "content"))
        return False
    return _stripped(attrs.get("name")).lower() == "robots" and _robots_nofollow(content)


def extract_css_urls(css: str) -> list[str]:
    """``url(...)`` and ``@import "..."`` references of a stylesheet, in order.

    A small regex scan, not a CSS parser: escapes and comments are not
    interpreted. Empty references are skipped. Never raises.
    """
    return [url for url, _ in extract_css_refs(css)]


def extract_css_refs(css: str) -> list[tuple[str, int]]:
    """``extract_css_urls`` with the offset (in characters) where each reference starts."""
    refs = []
    for match in _CSS_URL.finditer(css):
        group = next((g for g in range(1, 6) if match.group(g) is not None), None)
        if group is None:
            continue
        raw = match.group(group)
        url = raw.strip(_WHITESPACE)
        if url:
            refs.append((url, match.start(group) + len(raw) - len(raw.lstrip(_WHITESPACE))))
    return refs
