"""What one request produced: the record the fetchers return and the outcome reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from crawler import sniff
from crawler.errors import FailureKind

HTML_TYPES = ("text/html", "application/xhtml+xml")
CSS_TYPES = ("text/css",)
MARKDOWN_TYPES = ("text/markdown", "text/x-markdown")
# Markdown's file extensions, as lychee reads them (mimetypes knows two of them).
MARKDOWN_EXTENSIONS = (".md", ".markdown", ".mdown", ".mkd", ".mkdn", ".mdwn", ".mkdown", ".mdx")
# Plain-text files whose URLs are read when named as inputs, as lychee reads them
# (mimetypes knows some as text/*, others not at all).
PLAIN_TEXT_EXTENSIONS = (".txt", ".text", ".rst", ".rest", ".adoc", ".asciidoc", ".org")
_NOT_PLAIN = (*HTML_TYPES, *CSS_TYPES, *MARKDOWN_TYPES)


@dataclass(slots=True)
class Fetched:
    """A response, or the failure that stopped it."""

    method: str
    status: int | None = None
    reason: str | None = None
    failure: FailureKind | None = None
    error: str | None = None
    content_type: str | None = None
    location: str | None = None
    retry_after: str | None = None
    robots_tag: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # the few the policy reads
    body: bytes | None = None
    truncated: bool = False
    size: int | None = None
    elapsed_ms: int = 0
    # HEAD's status when a GET was sent to confirm it and answered otherwise.
    head_status: int | None = None
    # Validators the server sent (ETag, Last-Modified), kept with a page for re-crawls.
    etag: str | None = None
    last_modified: str | None = None

    @property
    def media_type(self) -> str:
        """The content type without parameters, lowercased."""
        return (self.content_type or "").split(";", 1)[0].strip().lower()

    @property
    def is_untyped(self) -> bool:
        """Did the server leave the type unsaid (no Content-Type, or an unknown one)?"""
        return sniff.is_unknown_type(self.media_type)

    @property
    def is_html(self) -> bool:
        """Is this an HTML document: said so, or untyped and starting like HTML?"""
        media_type = self.media_type
        if media_type in HTML_TYPES:
            return True
        return (
            self.body is not None
            and sniff.is_unknown_type(media_type)
            and sniff.looks_like_html(self.body)
        )

    @property
    def is_markdown(self) -> bool:
        """Is this a Markdown document (``README.md``), whose links are read too?"""
        return self.media_type in MARKDOWN_TYPES

    def markdown_at(self, url: str) -> bool:
        """``is_markdown``, or plain text at a Markdown file's name, as a forge's raw
        view serves ``README.md`` (``text/plain``): lychee reads it by its name too."""
        if self.media_type in MARKDOWN_TYPES:
            return True
        if self.media_type != "text/plain":
            return False
        return urlsplit(url).path.lower().endswith(MARKDOWN_EXTENSIONS)

    @property
    def is_plain_text(self) -> bool:
        """Is this text that is not HTML, CSS or Markdown (``notes.txt``, ``README.rst``)?

        Its URLs are read only when it was named as an input (a seed), as lychee
        reads any file it is given; a crawled site's text files are only checked.
        """
        media_type = self.media_type
        return media_type.startswith("text/") and media_type not in _NOT_PLAIN

    @property
    def is_css(self) -> bool:
        """Does the server say this is a stylesheet?"""
        return self.media_type in CSS_TYPES
