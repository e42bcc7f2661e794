"""A re-crawl's pure decisions (``crawler.recrawl``): when to ask conditionally, what a 304 yields.

The children of a page answered 304 are its recorded links classified again
by this crawl's scope at this crawl's depth: the same kinds a parse of the
unchanged body would give, including past ``--max-depth`` and for skipped
links; with ``--include-fragments`` the recorded anchors stand in for the body.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler import recrawl
from crawler import scope as scope_module
from crawler.config import CrawlSettings
from crawler.extract import extract_links
from crawler.fetch_types import Fetched
from crawler.models import (
    Discovered,
    LeasedUrl,
    Outcome,
    PreviousLink,
    PreviousPage,
    ResultClass,
    UrlKind,
)
from crawler.outcome import Policy, build_outcome
from crawler.scope import Scope

SEED = "http://site.test/"
BODY = (
    b'<html><body><a href="/a">a</a> <a href="/a#part">a</a> <img src="/logo.png">'
    b'<a href="mailto:x@site.test">m</a> <a href="http://other.test/">o</a>'
    b'<a href="/skip/me">s</a></body></html>'
)


def row(depth: int = 0, kind: UrlKind = UrlKind.PAGE) -> LeasedUrl:
    return LeasedUrl(1, SEED, "site.test", kind, depth, 0, 0)


def previous(links: tuple[PreviousLink, ...] = (), **fields: object) -> PreviousPage:
    values: dict[str, object] = {
        "url": SEED,
        "etag": '"e"',
        "last_modified": None,
        "status": 200,
        "content_type": "text/html",
        "bytes": len(BODY),
        "links": links,
        "anchors": None,
    }
    values.update(fields)
    return PreviousPage(**values)  # type: ignore[arg-type]


def recorded(children: list[PreviousLink]) -> tuple[PreviousLink, ...]:
    return tuple(sorted(children, key=lambda link: link[:3]))


def children_of(outcome: Outcome, page: PreviousPage) -> list[Discovered]:
    """What the store takes in for a 304 page: its recorded links, classified (``expand``)."""
    assert outcome.recorded is not None
    assert outcome.recorded.page == page.row
    assert not outcome.children  # by reference only: the store reads them
    return recrawl.expand(outcome, page.links).children


def parse(settings: CrawlSettings, depth: int) -> tuple[Scope, list[PreviousLink], set[Discovered]]:
    scope = Scope.build(settings, [SEED])
    fetched = Fetched("GET", status=200, content_type="text/html", body=BODY, size=len(BODY))
    full = build_outcome(row(depth), fetched, scope, Policy.from_settings(settings), 0.0)
    links: list[PreviousLink] = [
        (child.url, child.element, child.fragment, child.line, child.column)
        for child in full.children
    ]
    return scope, links, set(full.children)


def test_a_304_yields_the_children_a_parse_of_the_same_body_gives() -> None:
    for settings, depth in (
        (CrawlSettings(exclude=["/skip/"]), 0),
        (CrawlSettings(max_depth=1), 1),  # children past the depth limit: checked only
        (CrawlSettings(include_fragments=True), 0),
    ):
        scope, links, parsed = parse(settings, depth)
        policy = Policy.from_settings(settings)
        page = previous(recorded(links), anchors=frozenset({"x"}))
        answer = Fetched("GET", status=304, etag='"e"', elapsed_ms=3)
        assert recrawl.is_not_modified(answer)
        outcome = recrawl.not_modified(row(depth), page, answer, scope, policy)
        assert set(children_of(outcome, page)) == parsed
        assert outcome.result is not None
        assert (outcome.result.result_class, outcome.result.status) == (ResultClass.OK, 200)
        assert outcome.result.etag == '"e"'
        assert outcome.anchors == (frozenset({"x"}) if settings.include_fragments else None)
    assert extract_links(BODY.decode()).links  # the body does have links


def test_only_pages_with_validators_are_asked_conditionally() -> None:
    policy = Policy.from_settings(CrawlSettings())
    assert recrawl.conditional(row(), previous(), policy) is not None
    assert recrawl.conditional(row(), previous(etag=None, last_modified="x"), policy) is not None
    assert recrawl.conditional(row(), previous(etag=None), policy) is None
    assert recrawl.conditional(row(), None, policy) is None
    assert recrawl.conditional(row(kind=UrlKind.ANCHORS), previous(), policy) is None
    fragments = Policy.from_settings(CrawlSettings(include_fragments=True))
    assert recrawl.conditional(row(), previous(), fragments) is None  # anchors unknown
    assert recrawl.conditional(row(), previous(anchors=frozenset()), fragments) is not None


def test_only_a_304_answer_counts_as_unchanged() -> None:
    assert not recrawl.is_not_modified(Fetched("GET", status=200))
    failed = Fetched("GET", status=304)
    failed.failure = "timeout"  # type: ignore[assignment]
    assert not recrawl.is_not_modified(failed)


def test_the_recorded_links_memo_keeps_the_links_every_page_repeats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bounded, least recently used out: a link every page repeats stays classified once."""
    monkeypatch.setattr(scope_module, "RECORDED_MEMO_SIZE", 3)
    settings = CrawlSettings(exclude=["/skip/"])
    scope, links, parsed = parse(settings, 0)
    policy = Policy.from_settings(settings)
    answer = Fetched("GET", status=304, etag='"e"')
    nav = ("http://site.test/nav", "a", "", 1, 1)
    for round_ in range(3):  # each page: the navigation link, then links of its own
        own = [(f"http://site.test/p{round_}-{i}", "a", "", 2, i) for i in range(2)]
        page = previous(recorded([nav, *own]))
        children = children_of(recrawl.not_modified(row(), page, answer, scope, policy), page)
        fresh = Scope.build(settings, [SEED])  # nothing memoized: the same answers
        again = recrawl.not_modified(row(), page, answer, fresh, policy)
        assert children == children_of(again, page)
        assert all(type(child) is Discovered for child in children)
        assert [c.line for c in children] == [link[3] for link in page.links]
    memo = scope._recorded  # the memo is what this test is about
    assert len(memo) == 3
    assert ("http://site.test/nav", "", "a", "1") in memo
    page = previous(recorded(links))
    outcome = recrawl.not_modified(row(), page, answer, scope, policy)
    assert set(children_of(outcome, page)) == parsed


_URLS = st.sampled_from(
    [
        "http://site.test/a",
        "http://site.test/skip/me",
        "http://site.test/nofollow/x",
        "http://other.test/",
        "http://sub.site.test/b",
        "mailto:x@site.test",
        "javascript:void(0)",
    ]
)
_ELEMENTS = st.sampled_from(sorted({*scope_module.PAGE_ELEMENTS, "img", "script", "js:a", "link"}))
_FRAGMENTS = st.sampled_from(["", "part", ":~:text=x", "top"])


@given(
    url=_URLS,
    element=_ELEMENTS,
    fragment=_FRAGMENTS,
    depth=st.integers(0, 3),
    max_depth=st.one_of(st.none(), st.integers(0, 2)),
    include_fragments=st.booleans(),
    mode=st.sampled_from(["host", "domain", "prefix"]),
)
def test_the_per_url_answer_gives_every_links_kind(
    url: str,
    element: str,
    fragment: str,
    depth: int,
    max_depth: int | None,
    include_fragments: bool,
    mode: str,
) -> None:
    """``recorded_kind`` of ``recorded_target`` is ``classify_recorded``'s kind (SQLite's copy
    of a 304 page's links classifies them so, in SQL)."""
    settings = CrawlSettings(
        exclude=["/skip/"],
        no_follow=["/nofollow/"],
        max_depth=max_depth,
        include_fragments=include_fragments,
        scope=mode,  # type: ignore[arg-type]
    )
    scope = Scope.build(settings, [SEED])
    found = scope.classify_recorded(url, fragment, element=element, depth=depth)
    target = scope.recorded_target(url)
    kind = scope_module.recorded_kind(
        target,
        element,
        fragment,
        within=scope.within_depth(depth),
        include_fragments=scope.include_fragments,
    )
    assert kind == found.kind
    assert (target.skipped, target.reason) == (
        (found.result, found.reason) if found.kind == UrlKind.SKIP else (None, None)
    )
