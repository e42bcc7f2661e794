"""The cookie and HEAD-overruled parts of the storage contract, on both backends.

``put_cookies`` upserts by (domain, path, name) and stamps the time;
``get_cookies`` returns what was stamped at or after ``since`` (all when None),
deletions (expired cookies) included; a domain keeps at most
DEFAULT_MAX_COOKIES_PER_HOST, live ones first. ``head_unreliable_hosts`` names
the hosts with a result whose HEAD status a GET overruled. Cookies belong to
their crawl.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from crawler.config import DEFAULT_MAX_COOKIES_PER_HOST, CrawlSettings
from crawler.models import Cookie, Discovered, Outcome, Result, ResultClass, UrlKind
from crawler.store import open as store_open
from crawler.store.contract import FrontierStore

T0 = 1_000_000.0


@pytest.fixture
async def store(any_db: str) -> AsyncIterator[FrontierStore]:
    frontier = store_open.create_crawl(any_db, ["http://127.0.0.1/"], CrawlSettings())
    try:
        yield frontier
    finally:
        frontier.close()


def cookie(name: str, value: str = "v", **fields: object) -> Cookie:
    values: dict[str, object] = {"domain": "127.0.0.1", "path": "/", "name": name, "value": value}
    values.update(fields)
    return Cookie(**values)  # type: ignore[arg-type]


async def test_cookies_round_trip_with_every_field(store: FrontierStore) -> None:
    stored = [
        cookie("sid", '"quoted v"', secure=True, http_only=True, expires_at=T0 + 3600),
        cookie("pref", host_only=False, domain="example.test", path="/docs"),
    ]
    await store.put_cookies(stored, T0)
    got = await store.get_cookies()
    assert sorted(got, key=lambda c: c.name) == sorted(stored, key=lambda c: c.name)


async def test_a_cookie_is_replaced_by_its_identity(store: FrontierStore) -> None:
    await store.put_cookies([cookie("sid", "1"), cookie("sid", "x", path="/a")], T0)
    await store.put_cookies([cookie("sid", "2")], T0 + 1)
    got = {(c.path, c.value) for c in await store.get_cookies()}
    assert got == {("/", "2"), ("/a", "x")}


async def test_get_cookies_since_returns_later_changes_and_deletions(store: FrontierStore) -> None:
    await store.put_cookies([cookie("old"), cookie("gone")], T0)
    await store.put_cookies([cookie("new"), cookie("gone", "", expires_at=0.0)], T0 + 10)
    later = await store.get_cookies(T0 + 5)
    assert {c.name for c in later} == {"new", "gone"}
    deleted = next(c for c in later if c.name == "gone")
    assert deleted.is_expired(T0 + 10)
    assert len(await store.get_cookies()) == 3
    assert await store.get_cookies(T0 + 11) == []


async def test_a_domain_keeps_at_most_the_bound_live_ones_first(store: FrontierStore) -> None:
    await store.put_cookies([cookie("dead", expires_at=1.0)], T0)
    many = [cookie(f"c{i:03d}") for i in range(DEFAULT_MAX_COOKIES_PER_HOST + 5)]
    await store.put_cookies(many, T0 + 1)
    await store.put_cookies([cookie("other", domain="127.0.0.2")], T0 + 2)
    got = await store.get_cookies()
    mine = [c for c in got if c.domain == "127.0.0.1"]
    assert len(mine) == DEFAULT_MAX_COOKIES_PER_HOST
    assert all(not c.is_expired(T0) for c in mine)  # the deletion went first
    assert [c.name for c in got if c.domain == "127.0.0.2"] == ["other"]


async def test_cookies_belong_to_their_crawl(any_db: str) -> None:
    first = store_open.create_crawl(any_db, ["http://127.0.0.1/"], CrawlSettings())
    try:
        await first.put_cookies([cookie("sid")], T0)
    finally:
        first.close()
    second = store_open.create_crawl(any_db, ["http://127.0.0.1/"], CrawlSettings())
    try:
        assert await second.get_cookies() == []
    finally:
        second.close()
    resumed, _ = store_open.open_crawl(any_db, first.crawl_id)
    try:
        assert [c.name for c in await resumed.get_cookies()] == ["sid"]
    finally:
        resumed.close()


async def test_head_unreliable_hosts_come_from_overruled_results(store: FrontierStore) -> None:
    links = [
        Discovered(f"http://{host}/x", host, UrlKind.CHECK, "img")
        for host in ("127.0.0.2:80", "127.0.0.3:80")
    ]
    await store.enqueue(links, T0)
    assert await store.head_unreliable_hosts() == []
    leased = await store.lease("w", 10, 60.0, T0)
    outcomes = [
        Outcome(
            leased=row,
            result=Result(
                ResultClass.OK, status=200, head_status=404 if row.host == "127.0.0.2:80" else None
            ),
        )
        for row in leased
    ]
    assert await store.complete("w", outcomes, T0) == [True, True]
    assert await store.head_unreliable_hosts() == ["127.0.0.2:80"]
