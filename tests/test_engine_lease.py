"""How the engine leases, on both backends: one store call per lease, leases with commits.

Each call to the store waits behind the group commit its writer runs, so the
engine reads what it needs beside its rows in the lease call itself
(cookies, a re-crawl's previous pages), and leases with its group commits:
ahead of one, or right after it when the commit holds the only new work.
The counts below are of calls the engine makes to the store's class.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from crawler.store.postgres.frontier import PostgresFrontier
from crawler.store.sqlite.store import AsyncFrontier

from kit.crawlkit import crawl
from kit.sitekit import Page, SiteServer

COUNTED = ("lease", "lease_more", "complete", "complete_and_lease", "get_cookies", "previous_pages")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls to the store's methods named in ``COUNTED``, on either backend."""
    counted: Counter[str] = Counter()

    def counting(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return await method(self, *args, **kwargs)

        return wrapper

    for cls in (AsyncFrontier, PostgresFrontier):
        for name in COUNTED:
            monkeypatch.setattr(cls, name, counting(name, getattr(cls, name)))
    return counted


def gets(server: SiteServer) -> Counter[str]:
    counts = Counter(server.paths_requested("GET"))
    counts.pop("/robots.txt", None)
    return counts


async def test_a_first_crawl_reads_cookies_once_and_no_previous_pages(
    site_server, any_db: str, calls: Counter[str]
) -> None:
    """The cookies stored meanwhile come with each lease; a first crawl has no previous pages."""
    site = {"/": Page(links=[f"/p{i}" for i in range(40)])}
    site.update({f"/p{i}": Page(links=["/"]) for i in range(40)})
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")], max_concurrency=4)
    assert data.summary.pages == 41
    assert calls["lease_more"] + calls["complete_and_lease"] >= 2
    assert calls["get_cookies"] == 1  # the jar's load at the start, nothing per lease
    assert calls["previous_pages"] == 0
    assert calls["lease"] == 0  # every lease is lease_more's
    assert max(gets(server).values()) == 1


async def test_a_chain_of_pages_is_leased_by_the_commits_of_their_parents(
    site_server, any_db: str, calls: Counter[str]
) -> None:
    """Each page's only child is the only new work: it is leased in its parent's commit call.

    A lease of its own would wait for that commit, then cost another trip to
    the store's writer, at every level of the chain.
    """
    length = 8
    site = {f"/{i}": Page(links=[f"/{i + 1}"]) for i in range(length)}
    site[f"/{length}"] = Page()
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/0")])
    assert data.summary.pages == length + 1
    assert gets(server) == Counter({f"/{i}": 1 for i in range(length + 1)})
    assert calls["complete_and_lease"] >= length
    assert calls["lease_more"] <= 2  # the seed's (and at most one more)


async def test_pages_are_requested_level_by_level_at_concurrency_one(
    site_server, any_db: str
) -> None:
    """Leases that go with commits keep the lease order: no page before a shallower one."""
    site = {"/": Page(links=["/a", "/b", "/c"])}
    depth = {"/": 0}
    for name in "abc":
        kids = [f"/{name}{i}" for i in range(3)]
        site[f"/{name}"] = Page(links=kids)
        depth[f"/{name}"] = 1
        for kid in kids:
            site[kid] = Page(links=[f"{kid}/deep"])
            site[f"{kid}/deep"] = Page()
            depth[kid], depth[f"{kid}/deep"] = 2, 3
    server = await site_server(site)
    data = await crawl(any_db, [server.url("/")], max_concurrency=1, host_concurrency=1)
    assert data.summary.pages == len(site)
    order = [target for method, target in server.requests if method == "GET"]
    order = [target for target in order if target != "/robots.txt"]
    assert sorted(order) == sorted(site)  # each page once
    depths = [depth[target] for target in order]
    assert depths == sorted(depths), order
