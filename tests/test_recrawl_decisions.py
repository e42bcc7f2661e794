"""A re-crawl's pure decisions (``crawler.recrawl``): when to ask conditionally, what a 304 yields.

The children of a page answered 304 are its recorded links classified again
by this crawl's scope at this crawl's depth: the same kinds a parse of the
unchanged body would give, including past ``--max-depth`` and for skipped
links; with ``--include-fragments`` the recorded anchors stand in for the body.
"""

from __future__ import annotations

from crawler import recrawl
from crawler.config import CrawlSettings
from crawler.extract import extract_links
from crawler.fetch_types import Fetched
from crawler.models import Discovered, LeasedUrl, PreviousLink, PreviousPage, ResultClass, UrlKind
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
        assert set(outcome.children) == parsed
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
