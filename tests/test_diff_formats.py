"""``crawler diff``'s formats: every change shown, in a stable JSON shape, escaped where read."""

from __future__ import annotations

import json

import pytest

from crawler.report import DIFF_FORMATS
from crawler.report.diff import CrawlDiff, compare
from crawler.report.diff_formats import render
from crawler.report.model import BrokenLink

EVIL = 'http://site.test/"><script>alert(1)</script>'


def diff() -> CrawlDiff:
    return compare(
        3,
        4,
        before=[BrokenLink("http://site.test/old", 404, "404 Not Found", ["http://site.test/"])],
        after=[BrokenLink(EVIL, 500, "boom\x1b[31m", ["http://site.test/a"])],
        pages_before=["http://site.test/", "http://site.test/gone"],
        pages_after=["http://site.test/", "http://site.test/new"],
    )


def test_compare_sorts_each_change_into_its_list() -> None:
    found = diff()
    assert [link.url for link in found.new_broken] == [EVIL]
    assert [link.url for link in found.fixed] == ["http://site.test/old"]
    assert found.still_broken == []
    assert (found.pages_added, found.pages_removed) == (
        ["http://site.test/new"],
        ["http://site.test/gone"],
    )
    assert list(found.counts()) == [
        "new_broken",
        "fixed",
        "still_broken",
        "pages_added",
        "pages_removed",
    ]


@pytest.mark.parametrize("fmt", DIFF_FORMATS)
def test_every_format_shows_every_change(fmt: str) -> None:
    text = render(diff(), fmt)
    for shown in ("site.test/old", "site.test/new", "site.test/gone", "site.test/a"):
        assert shown in text, (fmt, shown)


def test_json_shape() -> None:
    doc = json.loads(render(diff(), "json"))
    assert list(doc) == [
        "from_crawl",
        "to_crawl",
        "counts",
        "new_broken",
        "fixed",
        "still_broken",
        "pages_added",
        "pages_removed",
    ]
    assert doc["new_broken"][0] == {
        "url": EVIL,
        "status": 500,
        "error": "boom\x1b[31m",
        "sources": ["http://site.test/a"],
        "locations": [],  # where each source writes it: none planted here
    }


def test_html_and_text_are_escaped() -> None:
    page = render(diff(), "html")
    assert "<script>" not in page
    assert "Content-Security-Policy" in page
    assert "\x1b" not in render(diff(), "text")
    assert "\x1b" not in render(diff(), "markdown")


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="no diff format"):
        render(diff(), "sarif")
