"""Does an untyped body start like HTML? The WHATWG MIME Sniffing rules for HTML.

A server that sends no ``Content-Type`` (or an "unknown" one) leaves the
type to the client; browsers sniff it, so a page served that way is a page to
them, and its links are followed. This module is the HTML part of the
"rules for identifying an unknown MIME type" (mimesniff section 7.1): skip
leading whitespace, then match one of a few case-insensitive tag openings
followed by a space or ``>``. Pure: bytes in, a bool out.
"""

from __future__ import annotations

# The resource header the rules read: at most this many bytes of the body.
SNIFF_BYTES = 1445
# Content-Type values that mean "unknown" to the sniffing rules, as no header does.
UNKNOWN_TYPES = frozenset({"", "unknown/unknown", "application/unknown", "*/*"})

_WHITESPACE = b"\t\n\x0c\r "
_TAG_TERMINATORS = b" >"
_HTML_OPENINGS = tuple(
    opening.encode("ascii")
    for opening in (
        "<!DOCTYPE HTML",
        "<HTML",
        "<HEAD",
        "<SCRIPT",
        "<IFRAME",
        "<H1",
        "<DIV",
        "<FONT",
        "<TABLE",
        "<A",
        "<STYLE",
        "<TITLE",
        "<B",
        "<BODY",
        "<BR",
        "<P",
        "<!--",
    )
)


def is_unknown_type(media_type: str) -> bool:
    """Does this media type (no parameters, lowercased) leave the type to sniffing?"""
    return media_type in UNKNOWN_TYPES


def looks_like_html(body: bytes) -> bool:
    """Whether ``body`` starts like HTML by the WHATWG rules (leading whitespace skipped)."""
    head = body[:SNIFF_BYTES].lstrip(_WHITESPACE).upper()
    for opening in _HTML_OPENINGS:
        if head.startswith(opening):
            terminator = head[len(opening) : len(opening) + 1]
            if terminator and terminator in _TAG_TERMINATORS:
                return True
    return False
