"""A re-crawl's decisions: when to ask "changed since?", and a 304's outcome.

Pure, like ``crawler.outcome``: a page the previous crawl stored validators
for is asked conditionally (``conditional``); when the server answers
``304 Not Modified`` the page is neither downloaded nor parsed, and
``not_modified`` completes it with the previous crawl's result and links.
Those links go through the crawl's scope again (``Scope.classify_recorded``)
at this crawl's depth, then through the same frontier dedup as a parsed
page's, so the re-crawl's frontier and report are what a full crawl's would be.
"""

from __future__ import annotations

from crawler.fetch_types import Fetched
from crawler.models import (
    Discovered,
    LeasedUrl,
    Outcome,
    PreviousPage,
    Result,
    ResultClass,
    UrlKind,
)
from crawler.outcome import Policy
from crawler.scope import Scope

NOT_MODIFIED = 304
_POSITION = Discovered._fields.index("line")  # line and column are the last two fields


def conditional(
    leased: LeasedUrl, previous: PreviousPage | None, policy: Policy
) -> PreviousPage | None:
    """The previous page to ask conditionally about, or None to fetch in full.

    A page to crawl with stored validators, whose anchors were recorded when
    this crawl checks fragments (else the body is needed for them).
    """
    if previous is None or leased.kind != UrlKind.PAGE:
        return None
    if not (previous.etag or previous.last_modified):
        return None
    if policy.include_fragments and previous.anchors is None:
        return None
    return previous


def is_not_modified(fetched: Fetched) -> bool:
    """Did the server answer a conditional request with 304 Not Modified?"""
    return fetched.failure is None and fetched.status == NOT_MODIFIED


def not_modified(
    leased: LeasedUrl, previous: PreviousPage, fetched: Fetched, scope: Scope, policy: Policy
) -> Outcome:
    """The outcome of a page answered 304: the previous result and links, found again."""
    result = Result(
        ResultClass.OK,
        status=previous.status,
        content_type=previous.content_type,
        bytes=previous.bytes,
        elapsed_ms=fetched.elapsed_ms,
        etag=fetched.etag or previous.etag,
        last_modified=fetched.last_modified or previous.last_modified,
    )
    depth = leased.depth + 1
    classify = scope.classify_recorded
    # The classified link with where the page writes it: built as a plain tuple
    # (``_replace`` per link cost a third of this loop on a 50-link page).
    children = [
        tuple.__new__(
            Discovered,
            (*classify(url, fragment, element=element, depth=depth)[:_POSITION], line, column),
        )
        for url, element, fragment, line, column in previous.links
    ]
    anchors = previous.anchors if policy.include_fragments else None
    return Outcome(leased=leased, result=result, children=children, anchors=anchors)
