"""Links out of Markdown documents (``README.md``, ``docs/*.md``), as lychee reads them.

A pure function of the text, as ``extract.extract_links`` is for HTML:
links ``[text](url)``, reference links, images ``![alt](src)``, autolinks
``<https://…>``, bare ``https://`` URLs in prose, and the links of HTML
written inside the Markdown (``<a href>``, ``<img src>``…). Code spans and
code blocks are not read: an example URL in a snippet is not a link, as
lychee's default. The anchors are the headings' GitHub ids (``## Install``
is ``#install``, a second one ``#install-1``), a heading's own ``{#id}``
(mkdocs, Pandoc) and the ids of embedded HTML. GitHub's footnotes are read
as GitHub reads them. Past ``PARSED_CHARS`` a document is scanned, not
parsed: markdown-it-py is too slow on hostile text to parse any length.

markdown-it-py (CommonMark, with GitHub's tables) parses: a hand-written
reader would get CommonMark's link and emphasis rules wrong. It gives each
block's first line; each link's offset is found from there, so every link
carries its line and column like an HTML page's.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from crawler import bare_urls, extract
from crawler.models import Extracted, RawLink

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_HEADING_ID = re.compile(r"\{[^{}#]*#([^\s{}]+)[^{}]*\}\s*$")  # attribute lists' {#id}
_FOOTNOTE_LABEL = re.compile(r"^ {0,3}\[\^[^\]\s]+\]:", re.MULTILINE)
# What may touch a link's value in the source without being part of it.
_VALUE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._~%-")
# markdown-it-py costs up to ~15 us a character on hostile text ("![" repeated),
# fifty times a README's cost: past this many characters a document is scanned by
# regex instead (``_SCANNED``), so a page of --max-body-bytes costs seconds, not
# minutes. Few Markdown files are longer.
PARSED_CHARS = 256_000
# The scan: inline links and images ``](url``, reference definitions, bare URLs.
_SCANNED = re.compile(
    r"\]\(\s*<?([^\s()<>]+)|^ {0,3}\[[^\]\n]+\]:[ \t]*<?([^\s<>]+)|" + bare_urls.BARE_URL.pattern,
    re.IGNORECASE | re.MULTILINE,
)
# Bounds that keep placing links linear on any text: occurrences inside longer
# values tried per search, and searches that read to the end in vain (a value
# written with escapes); past them a link simply has no position.
MAX_CANDIDATES = 256
MAX_MISSES = 64


@dataclass(slots=True)
class MarkdownLinks:
    """The links of a Markdown document, each with the offset where it is written (-1: unknown)."""

    extracted: Extracted
    offsets: list[int]


def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    # Keep destinations as written: resolution and normalization are the scope's job.
    parser.normalizeLink = lambda url: url  # type: ignore[method-assign]
    parser.validateLink = lambda url: True  # type: ignore[method-assign]
    return parser


_MARKDOWN = _parser()


def extract_markdown(text: str, limit: int | None = None) -> MarkdownLinks:
    """Every link of a Markdown document in document order, and its heading anchors.

    With ``limit``, links past the first ``limit`` are counted in ``dropped``.
    Never raises on any text.
    """
    reader = _Reader(text, limit)
    parsed = _parsed_part(text)
    try:
        tokens = _MARKDOWN.parse(_without_footnote_labels(text[:parsed]))
    except Exception:  # a parser bug must not lose the page's result
        tokens = []
    for token in tokens:
        reader.block(token)
    if parsed < len(text):
        reader.scan(parsed)
    return reader.result()


def _without_footnote_labels(text: str) -> str:
    """GitHub's footnotes (``[^1]: see [the spec](https://…)``) as plain paragraphs.

    CommonMark reads ``[^1]:`` as a link reference definition whose destination
    is the note's first word (``[the``), and ``[^1]`` in the text as a link to
    it; GitHub reads a note whose links are links. The label is overwritten
    with as many letters: offsets and lines stay those of the text.
    """
    if "[^" not in text:
        return text
    return _FOOTNOTE_LABEL.sub(lambda match: "x" * len(match.group()), text)


def _parsed_part(text: str) -> int:
    """How much of the text markdown-it parses: all of it, up to ``PARSED_CHARS``, then
    up to a line break (the rest is scanned)."""
    if len(text) <= PARSED_CHARS:
        return len(text)
    cut = text.rfind("\n", 0, PARSED_CHARS)
    return cut + 1 if cut > 0 else PARSED_CHARS


class _Reader:
    """Walks the block tokens once, collecting links, offsets and anchors."""

    def __init__(self, text: str, limit: int | None) -> None:
        self.text = text
        self.limit = limit
        self.links: list[RawLink] = []
        self.offsets: list[int] = []
        self.anchors: set[str] = set()
        self.slugs: dict[str, int] = {}
        self.dropped = 0
        self.cursor = 0
        self.misses = 0  # searches that read to the end of the text in vain
        self.line_starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
        self.heading = False

    def result(self) -> MarkdownLinks:
        extracted = Extracted(self.links, anchors=frozenset(self.anchors), dropped=self.dropped)
        return MarkdownLinks(extracted, self.offsets)

    def scan(self, start: int) -> None:
        """The links of ``text[start:]`` by regex: a bounded cost on any text, at the price
        of reading code blocks as prose."""
        for match in _SCANNED.finditer(self.text, start):
            group = match.lastindex or 0
            value = match.group(group) if group else bare_urls.trim(match.group())
            at = match.start(group) if group else match.start()
            self._append(value.strip(), "a", "href", at)

    def block(self, token: Token) -> None:
        start = self._line_start(token.map)
        if token.type == "heading_open":
            self.heading = True
        elif token.type == "inline":
            if self.heading:
                self._heading_anchor(token.children or [])
                self.heading = False
            self._inline(token.children or [], start)
        elif token.type == "html_block":
            self._html(token.content, start)

    def _inline(self, children: Sequence[Token], start: int) -> None:
        inside_link = 0
        for child in children:
            kind = child.type
            if kind == "link_open":
                inside_link += 1
                self._add(str(child.attrs.get("href", "")), "a", "href", start)
            elif kind == "link_close":
                inside_link = max(0, inside_link - 1)
            elif kind == "image":
                self._add(str(child.attrs.get("src", "")), "img", "src", start)
            elif kind == "html_inline":
                self._html(child.content, start)
            elif kind == "text" and not inside_link and "://" in child.content:
                for url, _ in bare_urls.find(child.content):
                    self._add(url, "a", "href", start)

    def _html(self, html: str, start: int) -> None:
        if "=" not in html:  # no attribute, so no link and no id: a closing tag, <br>
            return
        found = extract.extract_links(html)
        self.anchors |= found.anchors
        for link in found.links:
            self._add(link.url, link.element, link.attribute, start)

    def _heading_anchor(self, children: Sequence[Token]) -> None:
        title = "".join(c.content for c in children if c.type in ("text", "code_inline"))
        named = _HEADING_ID.match(title, max(title.rfind("{"), 0))  # the last {: linear
        if named:  # ``## Setup {#setup}``: mkdocs' and Pandoc's own id, beside GitHub's
            self.anchors.add(named.group(1))
        slug = github_slug(title)
        seen = self.slugs.get(slug)
        self.slugs[slug] = 0 if seen is None else seen + 1
        self.anchors.add(slug if seen is None else f"{slug}-{seen + 1}")

    def _add(self, url: str, element: str, attribute: str, start: int) -> None:
        url = url.strip()
        if not url:
            return
        if self.limit is not None and len(self.links) >= self.limit:
            self.dropped += 1
            return
        at = self._locate(url, start)
        if at < 0 and url.startswith("mailto:"):  # <me@example.org> gains its scheme
            at = self._locate(url.removeprefix("mailto:"), start)
        self._append(url, element, attribute, at)

    def _append(self, url: str, element: str, attribute: str, at: int) -> None:
        if not url:
            return
        if self.limit is not None and len(self.links) >= self.limit:
            self.dropped += 1
            return
        self.links.append(RawLink(url, element, attribute))
        self.offsets.append(at)

    def _locate(self, value: str, start: int) -> int:
        """Where ``value`` is written, searched from its block's first line (and the last find)."""
        if self.misses >= MAX_MISSES:  # a hostile page: the rest go without a place
            return -1
        text = self.text
        for origin in (max(start, self.cursor), start):
            at = text.find(value, origin)
            for _ in range(MAX_CANDIDATES):
                if at <= 0 or text[at - 1] not in _VALUE_CHARS:
                    break
                at = text.find(value, at + 1)
            else:
                at = -1
            if at >= 0:
                self.cursor = at + 1
                return at
        self.misses += 1
        return -1

    def _line_start(self, lines: list[int] | None) -> int:
        if not lines:
            return self.cursor
        index = lines[0]
        return self.line_starts[index] if index < len(self.line_starts) else len(self.text)


def github_slug(title: str) -> str:
    """The id GitHub gives a heading: lowercased, punctuation dropped, spaces as hyphens.

    Letters, marks and digits of any script are kept, as are ``-`` and ``_``.
    """
    kept = (
        char
        for char in title.strip().lower()
        if char in "-_ " or unicodedata.category(char)[0] in "LMN"
    )
    return "".join(kept).replace(" ", "-")
