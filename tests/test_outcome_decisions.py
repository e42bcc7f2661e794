"""One place per decision in ``crawler.outcome``: the retry delay and whether a body is parsed.

The engine pauses a host for a 429/503 and sends bodies to parse helpers; it
asks ``outcome`` both questions instead of answering them itself, so the host
waits exactly as long as the URL, and a helper parses exactly what
``build_outcome`` would have parsed.
"""

from __future__ import annotations

import itertools

import pytest

from crawler.config import CrawlSettings
from crawler.errors import FailureKind
from crawler.fetch_types import Fetched
from crawler.models import LeasedUrl, UrlKind
from crawler.outcome import Policy, build_outcome, host_pause_s, parse_body, wants_parse
from crawler.scope import Scope

NOW = 1_700_000_000.0
SEED = "http://127.0.0.1:8000/"
BODY = b'<a href="/a">a</a><p id="x">x</p>'
CSS = b"body{background:url('/bg.png')}"


def row(kind: UrlKind = UrlKind.PAGE, attempts: int = 0) -> LeasedUrl:
    return LeasedUrl(1, SEED, "127.0.0.1:8000", kind, 0, 0, attempts)


def policy(**settings: object) -> Policy:
    return Policy.from_settings(CrawlSettings(**settings))


@pytest.mark.parametrize("status", [429, 503])
def test_the_host_waits_exactly_as_long_as_the_url(status: int) -> None:
    fetched = Fetched("GET", status=status)  # no Retry-After: backoff with jitter
    outcome = build_outcome(row(), fetched, Scope.build(CrawlSettings(), [SEED]), policy(), NOW)
    assert outcome.retry_at is not None
    assert host_pause_s(fetched, outcome, NOW) == pytest.approx(outcome.retry_at - NOW)


def test_retry_after_sets_both_waits() -> None:
    fetched = Fetched("GET", status=429, retry_after="7")
    outcome = build_outcome(row(), fetched, Scope.build(CrawlSettings(), [SEED]), policy(), NOW)
    assert outcome.retry_at == NOW + 7
    assert host_pause_s(fetched, outcome, NOW) == pytest.approx(7)


@pytest.mark.parametrize(
    ("fetched", "attempts", "settings"),
    [
        (Fetched("GET", status=500), 0, {}),  # retried, but the host is not overloaded
        (Fetched("GET", failure=FailureKind.TIMEOUT), 0, {}),
        (Fetched("GET", status=429), 3, {}),  # retries used up: final, no pause
        (Fetched("GET", status=429), 0, {"accept": ["200..=299, 429"]}),  # accepted
    ],
)
def test_no_host_pause(fetched: Fetched, attempts: int, settings: dict[str, object]) -> None:
    scope = Scope.build(CrawlSettings(), [SEED])
    outcome = build_outcome(row(attempts=attempts), fetched, scope, policy(**settings), NOW)
    assert host_pause_s(fetched, outcome, NOW) is None


@pytest.mark.parametrize(
    ("kind", "status", "content_type", "fragments", "accept"),
    list(
        itertools.product(
            [UrlKind.CHECK, UrlKind.ANCHORS, UrlKind.PAGE],
            [200, 204, 404],
            ["text/html", "text/css", "image/png"],
            [False, True],
            ["200..=299", "200"],
        )
    ),
)
def test_wants_parse_is_exactly_when_parsing_finds_something(
    kind: UrlKind, status: int, content_type: str, fragments: bool, accept: str
) -> None:
    body = CSS if content_type == "text/css" else BODY
    fetched = Fetched("GET", status=status, content_type=content_type, body=body)
    scope = Scope.build(CrawlSettings(), [SEED])
    judge = policy(include_fragments=fragments, accept=[accept])
    inline = build_outcome(row(kind), fetched, scope, judge, NOW)
    found = bool(inline.children) or inline.anchors is not None
    assert wants_parse(row(kind), fetched, judge) == found
    if wants_parse(row(kind), fetched, judge):  # a helper's answer is the inline one
        helper = parse_body(row(kind), fetched, scope, fragments)
        given = build_outcome(row(kind), fetched, scope, judge, NOW, helper)
        assert (given.children, given.anchors) == (inline.children, inline.anchors)
