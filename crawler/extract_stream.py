"""Links out of very large documents, read as a stream of tags, without a tree.

Lexbor builds a tree of ~13 bytes per byte of HTML, which for the odd
multi-megabyte page (an index, a changelog) is most of the crawler's memory.
Such a page is parsed in pieces where it can be cut (``extract._pieces``);
one that cannot (a single huge table, say) comes here.
The standard library's tokenizer reads the same tags in document order,
keeping only the links: slower than Lexbor (bench/RESULTS.md, session 17),
for the memory of the links alone. Elements go to the
``extract.Found`` the caller passes, the same reader the tree walk feeds;
what a tree would hide is hidden here too: tags inside raw-text elements
(textarea, title, …) and inside <template>.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import TYPE_CHECKING

from crawler.extract import TEXT_CONTENT

if TYPE_CHECKING:
    from crawler.extract import Found

# Elements whose content is text to an HTML parser (the tokenizer knows only
# script and style), and <template>, whose content is not in the document.
_OPAQUE = frozenset(TEXT_CONTENT).difference({"script", "style"}) | {"template"}
# Tags that may come before a <frameset>; after any other, a tree builder
# ignores <frameset> and <frame> (the document has a body).
_BEFORE_FRAMES = frozenset(
    {"html", "head", "title", "base", "link", "meta", "style", "script", "noscript", "frameset",
     "frame", "noframes"}
)  # fmt: skip


class _Tokens(HTMLParser):
    def __init__(self, found: Found) -> None:
        super().__init__(convert_charrefs=True)
        self.found = found
        self._opaque: str | None = None  # the element whose content is skipped
        self._depth = 0  # nested <template>s inside it
        self._style: list[str] | None = None
        self._has_body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._opaque is not None:
            self._depth += tag == self._opaque == "template"
            return
        if tag not in _BEFORE_FRAMES:
            self._has_body = True
        elif tag == "frame" and self._has_body:
            return
        values: dict[str, str | None] = {}
        for name, value in attrs:
            values.setdefault(name, value)  # the first of duplicates, as HTML keeps
        if values:
            self.found.element(tag, values)
        if tag in _OPAQUE:
            self._opaque = tag
        elif tag == "style":
            self._style = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        saved = self._opaque
        self.handle_starttag(tag, attrs)
        if self._opaque != saved:  # "<textarea/>" opens nothing in HTML either
            self._opaque = saved
        if tag == "style":
            self._style = None

    def handle_endtag(self, tag: str) -> None:
        if self._opaque is not None:
            if tag == self._opaque:
                if self._depth:
                    self._depth -= 1
                else:
                    self._opaque = None
            return
        if tag == "style" and self._style is not None:
            self.found.style("".join(self._style))
            self._style = None

    def handle_data(self, data: str) -> None:
        if self._style is not None and self._opaque is None:
            self._style.append(data)


def read_tags(html: str, found: Found) -> None:
    """Feed the elements of ``html`` to ``found``, as the tree walk would. Never raises."""
    tokens = _Tokens(found)
    try:
        tokens.feed(html)
        tokens.close()
    except Exception:  # noqa: S110 - the tokenizer is lenient; keep what was read
        pass
    if tokens._style is not None:  # an unclosed <style> runs to the end
        found.style("".join(tokens._style))
