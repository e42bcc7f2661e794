"""A re-crawl's decisions: when to ask "changed since?", and a 304's outcome.

Pure, like ``crawler.outcome``: a page the previous crawl stored validators
for is asked conditionally (``conditional``); when the server answers
``304 Not Modified`` the page is neither downloaded nor parsed, and
``not_modified`` completes it with the previous crawl's result, and its links
by reference (``Recorded``): the store takes them from the previous crawl's
rows as it commits, each through the crawl's scope again
(``Scope.classify_recorded``, or its per-URL form ``recorded_target``) at
this crawl's depth and through the same frontier dedup as a parsed page's,
so the re-crawl's frontier and report are what a full crawl's would be.
``expand`` is that meaning in Python, for a store that reads the links.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from crawler.fetch_types import Fetched
from crawler.models import (
    Discovered,
    LeasedUrl,
    Outcome,
    PreviousLink,
    PreviousPage,
    Recorded,
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
    """The outcome of a page answered 304: the previous result, and links by reference."""
    result = Result(
        ResultClass.OK,
        status=previous.status,
        content_type=previous.content_type,
        bytes=previous.bytes,
        elapsed_ms=fetched.elapsed_ms,
        etag=fetched.etag or previous.etag,
        last_modified=fetched.last_modified or previous.last_modified,
    )
    anchors = previous.anchors if policy.include_fragments else None
    return Outcome(
        leased=leased, result=result, anchors=anchors, recorded=Recorded(previous.row, scope)
    )


def expand(outcome: Outcome, links: Iterable[PreviousLink]) -> Outcome:
    """The outcome with its recorded links as children (``Recorded``'s meaning)."""
    recorded = outcome.recorded
    if recorded is None:
        return outcome
    depth = outcome.leased.depth + 1
    classify = recorded.scope.classify_recorded
    # The classified link with where the page writes it: built as a plain tuple
    # (``_replace`` per link cost a third of this loop on a 50-link page).
    children = [
        tuple.__new__(
            Discovered,
            (*classify(url, fragment, element=element, depth=depth)[:_POSITION], line, column),
        )
        for url, element, fragment, line, column in sorted(links, key=lambda link: link[:3])
    ]
    return dataclasses.replace(outcome, children=[*outcome.children, *children], recorded=None)


def expand_all(
    outcomes: Sequence[Outcome], links: Mapping[int, Iterable[PreviousLink]]
) -> list[Outcome]:
    """``expand`` for a batch, with the links a store read by previous page row."""
    return [
        o if o.recorded is None else expand(o, links.get(o.recorded.page, ())) for o in outcomes
    ]
