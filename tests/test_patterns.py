"""User regular expressions run on RE2: no pattern can stall a crawl (or the service)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.config import CrawlSettings
from crawler.patterns import compile_pattern
from crawler.settings_model import SettingsError as ValidationError

from kit.crawlkit import crawl
from kit.sitekit import Page

EVIL = "(a+)+$"
# Python's re needs about 2**40 steps to reject this against EVIL: a stalled loop.
EVIL_PATH = "/" + "a" * 40 + "!"


async def test_a_catastrophic_pattern_does_not_stall_the_crawl(site_server, tmp_path: Path) -> None:
    links = [f"{EVIL_PATH}{n}" for n in range(20)]
    server = await site_server({"/": Page(links=[*links, "/aaa"]), "/aaa": Page()})
    data = await crawl(tmp_path / "c.db", [server.url("/")], exclude=[EVIL])
    assert data.summary.excluded == 1  # "/aaa" ends in a's: excluded; the others are not
    assert server.count("/aaa") == 0


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(?=x)", "invalid perl operator: (?="),
        ("(?<!x)y", "invalid perl operator: (?<"),
        (r"(a)\1", "invalid escape sequence: \\1"),
    ],
)
def test_patterns_re2_refuses_say_why(pattern: str, reason: str) -> None:
    with pytest.raises(ValidationError) as caught:
        CrawlSettings(exclude=[pattern])
    message = str(caught.value)
    assert reason in message
    assert "RE2 syntax: no look-around, no backreferences" in message
    with pytest.raises(ValidationError, match="RE2 syntax"):
        CrawlSettings(basic_auth=[f"{pattern} user:pass"])


@pytest.mark.parametrize(
    ("pattern", "url", "matches"),
    [
        (r"\.pdf$", "https://e.org/a.pdf", True),
        (r"(?i)/PRIVATE/", "https://e.org/private/x", True),
        (r"^https://e\.org/(?P<lang>en|fr)/", "https://e.org/de/", False),
        (r"\bdocs\b", "https://e.org/docs/x", True),
        (r"/\d{4}/\d{2}/", "https://e.org/2024/05/post", True),
    ],
)
def test_what_url_filters_use_works_as_in_python(pattern: str, url: str, matches: bool) -> None:
    assert (compile_pattern(pattern).search(url) is not None) is matches
