"""The crawl's cookie jar: aiohttp's rules, what it reports as changed, and the file.

``CrawlJar`` decides nothing itself (domain, path, secure and expiry are
aiohttp's); these tests pin what it adds: the changes handed to the store,
the per-host bound, merging stored cookies, and ``--cookie-jar`` files that
keep each cookie's expiry.
"""

from __future__ import annotations

import calendar
import http.cookiejar
import time
from pathlib import Path

from yarl import URL

from crawler.models import Cookie
from crawler.net import cookies
from crawler.net.cookies import CrawlJar

SITE = URL("http://127.0.0.1:8080/docs/page")


async def test_changes_carry_absolute_expiry_and_deletions() -> None:
    jar = CrawlJar(max_per_host=50)
    before = time.time()
    jar.update_cookies_from_headers(
        ["sid=abc; Path=/; Max-Age=100", "lang=en; Path=/; Expires=Wed, 21 Oct 2099 07:28:00 GMT"],
        SITE,
    )
    changes = {c.name: c for c in jar.take_changes()}
    assert changes["sid"].expires_at is not None
    assert before + 100 <= changes["sid"].expires_at <= time.time() + 100
    assert changes["lang"].expires_at == calendar.timegm((2099, 10, 21, 7, 28, 0))
    assert changes["sid"].host_only
    assert jar.take_changes() == []
    jar.update_cookies_from_headers(["sid=; Path=/; Max-Age=0"], SITE)
    (deleted,) = jar.take_changes()
    assert deleted.name == "sid"
    assert deleted.is_expired(time.time())


async def test_a_host_keeps_at_most_the_bound() -> None:
    jar = CrawlJar(max_per_host=3)
    jar.update_cookies_from_headers([f"c{i}=v; Path=/" for i in range(5)], SITE)
    assert len(jar.export()) == 3
    assert len(jar.take_changes()) == 3
    jar.update_cookies_from_headers(["c0=new; Path=/"], SITE)  # replacing is not adding
    assert {c.value for c in jar.export() if c.name == "c0"} == {"new"}


async def test_merged_cookies_follow_the_librarys_rules() -> None:
    jar = CrawlJar(max_per_host=50)
    jar.merge(
        [
            Cookie("127.0.0.1", "/docs", "scoped", "1"),
            Cookie("127.0.0.1", "/", "token", "2", secure=True),
            Cookie("127.0.0.1", "/", "expires", "a name a morsel refuses"),
            Cookie("127.0.0.1", "/", "old", "3", expires_at=time.time() - 10),
        ]
    )
    sent = jar.filter_cookies(URL("http://127.0.0.1/docs/x"))
    assert set(sent) == {"scoped"}  # not the Secure one over http, not the expired one
    assert set(jar.filter_cookies(URL("https://127.0.0.1/"))) == {"token"}
    assert jar.take_changes() == []  # what came from the store is not a change


async def test_a_stored_deletion_removes_the_cookie() -> None:
    jar = CrawlJar(max_per_host=50)
    jar.merge([Cookie("127.0.0.1", "/", "sid", "1")])
    jar.merge([Cookie("127.0.0.1", "/", "sid", "", expires_at=0.0)])
    assert jar.export() == []


async def test_a_cookie_file_keeps_expiry_through_save_and_load(tmp_path: Path) -> None:
    path = tmp_path / "cookies.txt"
    jar = CrawlJar(max_per_host=50)
    jar.update_cookies_from_headers(
        ["sid=abc; Path=/; Max-Age=3600", "pref=1; Domain=127.0.0.1; Path=/docs"], SITE
    )
    cookies.save(jar, str(path))
    source = http.cookiejar.MozillaCookieJar(str(path))
    source.load(ignore_discard=True, ignore_expires=True)
    by_name = {c.name: c for c in source}
    assert by_name["sid"].expires is not None
    assert abs(by_name["sid"].expires - (time.time() + 3600)) < 5
    assert by_name["pref"].expires is None  # a session cookie stays one
    again = CrawlJar(max_per_host=50)
    cookies.load(again, str(path))
    loaded = {c.name: c for c in again.export()}
    assert loaded["sid"].expires_at is not None
    assert abs(loaded["sid"].expires_at - (time.time() + 3600)) < 5
    assert loaded["sid"].host_only
    assert not loaded["pref"].host_only
    assert {c.name for c in again.take_changes()} == {"sid", "pref"}  # for the crawl's store
