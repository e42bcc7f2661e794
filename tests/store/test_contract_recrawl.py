"""The re-crawl contract, run on every backend: validators kept, ``previous_pages``, ``load_diff``.

A page completed OK with validators keeps them; a crawl recorded with
``previous_crawl_id`` reads back, for its pages, what that crawl stored
(validators, result, every link from both link tables, anchors); and two
crawls compare to exactly what changed between them.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from backends import Backend
from contractkit import BROKEN, OK, T0, Plan, disc, drain, outcome, u

from crawler import recrawl
from crawler.config import CrawlSettings
from crawler.errors import UsageError
from crawler.models import Discovered, Outcome, PreviousPage, Recorded, Result, UrlKind
from crawler.report.model import BrokenLink
from crawler.scope import Scope
from crawler.store import open as store_open
from crawler.store.contract import FrontierStore


def tagged(etag: str | None = None, modified: str | None = None) -> Result:
    return dataclasses.replace(
        OK, content_type="text/html", bytes=120, etag=etag, last_modified=modified
    )


async def recrawl_of(db: Backend, previous: int, **config: object) -> FrontierStore:
    settings = CrawlSettings(**config)  # type: ignore[arg-type]
    store = await asyncio.to_thread(
        store_open.create_crawl, db.db, [], settings, previous_crawl_id=previous
    )
    db.stores.append(store)
    return store


async def test_previous_pages_hold_validators_results_links_and_anchors(db: Backend) -> None:
    first = await db.store()
    await first.enqueue([disc(u("home"))], T0)
    plan = Plan(
        results={
            u("home"): tagged('"h1"', "Mon, 30 Nov 2026 10:00:00 GMT"),
            u("about"): tagged(modified="Mon, 30 Nov 2026 11:00:00 GMT"),
            u("plain"): OK,  # no validators: never asked conditionally
            u("gone"): BROKEN,
        },
        children={
            u("home"): [
                disc(u("about"))._replace(line=3, column=7),
                disc(u("plain")),
                disc(u("gone"))._replace(line=1, column=2000),  # past the packed short form
                disc(u("logo.png"), UrlKind.CHECK, element="img"),
                disc(u("about"), fragment="team"),
            ],
            u("about"): [disc(u("home"))],  # settled by then: kept in the other link table
        },
    )
    await drain(first, plan)
    second = await recrawl_of(db, first.crawl_id)
    found = await second.previous_pages([u("home"), u("about"), u("plain"), u("gone"), u("x")])
    assert set(found) == {u("home"), u("about")}
    home = found[u("home")]
    assert (home.etag, home.last_modified) == ('"h1"', "Mon, 30 Nov 2026 10:00:00 GMT")
    assert (home.status, home.content_type, home.bytes) == (200, "text/html", 120)
    assert set(home.links) == {
        (u("about"), "a", "", 3, 7),  # where the page writes it, kept for the re-crawl
        (u("about"), "a", "team", None, None),
        (u("plain"), "a", "", None, None),
        (u("gone"), "a", "", 1, 2000),
        (u("logo.png"), "img", "", None, None),
    }
    assert home.anchors is None
    assert found[u("about")] == PreviousPage(
        url=u("about"),
        etag=None,
        last_modified="Mon, 30 Nov 2026 11:00:00 GMT",
        status=200,
        content_type="text/html",
        bytes=120,
        links=((u("home"), "a", "", None, None),),
        anchors=None,
        row=(await db.rows(first.crawl_id))[u("about")].id,
    )
    bare = await second.previous_pages([u("home"), u("about")], with_links=False)
    assert bare == {url: dataclasses.replace(found[url], links=()) for url in bare}
    assert set(bare) == {u("home"), u("about")}


async def test_anchors_come_back_when_they_were_recorded(db: Backend) -> None:
    first = await db.store()
    await first.enqueue([disc(u("a")), disc(u("b"))], T0)
    leased = await first.lease("w1", 10, 30.0, T0)
    outs = [
        outcome(row, tagged('"t"'), anchors=frozenset({"x", "y"}) if row.url == u("a") else None)
        for row in leased
    ]
    assert all(await first.complete("w1", outs, T0))
    second = await recrawl_of(db, first.crawl_id)
    found = await second.previous_pages([u("a"), u("b")])
    assert found[u("a")].anchors == frozenset({"x", "y"})
    assert found[u("b")].anchors is None


async def test_a_crawl_that_is_no_recrawl_has_no_previous_pages(db: Backend) -> None:
    first = await db.store()
    await first.enqueue([disc(u("a"))], T0)
    await drain(first, Plan(results={u("a"): tagged('"t"')}))
    other = await db.store()
    assert await other.previous_pages([u("a")]) == {}
    assert await first.previous_pages([u("a")]) == {}


async def test_only_pages_crawled_ok_keep_validators(db: Backend) -> None:
    first = await db.store()
    await first.enqueue([disc(u("p")), disc(u("c"), UrlKind.CHECK)], T0)
    broken_tagged = dataclasses.replace(BROKEN, etag='"b"')
    await drain(first, Plan(results={u("p"): broken_tagged, u("c"): tagged('"c"')}))
    second = await recrawl_of(db, first.crawl_id)
    assert await second.previous_pages([u("p"), u("c")]) == {}


async def crawl(db: Backend, plan: Plan, seeds: list[str]) -> int:
    store = await db.store()
    await store.enqueue([disc(seed) for seed in seeds], T0)
    await drain(store, plan)
    assert await store.finish_if_quiescent(T0)
    return store.crawl_id


async def test_diff_of_two_crawls_is_exactly_what_changed(db: Backend) -> None:
    before = Plan(
        results={u("old-dead"): BROKEN, u("stays-dead"): BROKEN, u("removed"): OK},
        children={
            u("home"): [disc(u("a")), disc(u("removed")), disc(u("stays-dead"), UrlKind.CHECK)],
            u("a"): [disc(u("old-dead"), UrlKind.CHECK)],
        },
    )
    after = Plan(
        results={u("new-dead"): BROKEN, u("stays-dead"): BROKEN, u("old-dead"): OK},
        children={
            u("home"): [disc(u("a")), disc(u("added")), disc(u("stays-dead"), UrlKind.CHECK)],
            u("a"): [disc(u("old-dead"), UrlKind.CHECK), disc(u("new-dead"), UrlKind.CHECK)],
            u("added"): [disc(u("new-dead"), UrlKind.CHECK)],
        },
    )
    first = await crawl(db, before, [u("home")])
    second = await crawl(db, after, [u("home")])
    diff = await asyncio.to_thread(store_open.load_diff, db.db)
    assert (diff.from_crawl, diff.to_crawl) == (first, second)
    assert plain(diff.new_broken) == [
        BrokenLink(u("new-dead"), 404, "HTTP 404", [u("a"), u("added")])
    ]
    assert plain(diff.fixed) == [BrokenLink(u("old-dead"), 404, "HTTP 404", [u("a")])]
    assert plain(diff.still_broken) == [BrokenLink(u("stays-dead"), 404, "HTTP 404", [u("home")])]
    assert diff.pages_added == [u("added")]
    assert diff.pages_removed == [u("removed")]
    assert diff.counts() == {
        "new_broken": 1,
        "fixed": 1,
        "still_broken": 1,
        "pages_added": 1,
        "pages_removed": 1,
    }
    backwards = await asyncio.to_thread(store_open.load_diff, db.db, second, first)
    assert [link.url for link in backwards.new_broken] == [u("old-dead")]
    assert backwards.pages_added == [u("removed")]


async def test_diff_defaults_skip_unfinished_crawls_and_compare_only_the_same_seeds(
    db: Backend,
) -> None:
    plan = Plan(results={u("dead"): BROKEN}, children={u("home"): [disc(u("dead"), UrlKind.CHECK)]})
    only = await crawl(db, plan, [u("home")])
    lone = await asyncio.to_thread(store_open.load_diff, db.db)
    assert (lone.from_crawl, lone.to_crawl) == (0, only)  # nothing earlier: all of it is new
    assert [link.url for link in lone.new_broken] == [u("dead")]
    unfinished = await db.store()
    await unfinished.enqueue([disc(u("home"))], T0)
    again = await crawl(db, plan, [u("home")])
    diff = await asyncio.to_thread(store_open.load_diff, db.db)
    assert (diff.from_crawl, diff.to_crawl) == (only, again)
    assert diff.counts() == dict.fromkeys(diff.counts(), 0) | {"still_broken": 1}
    other_site = await asyncio.to_thread(
        store_open.create_crawl, db.db, ["http://b.test/"], CrawlSettings()
    )
    db.stores.append(other_site)
    await drain(other_site, plan)
    assert await other_site.finish_if_quiescent(T0)
    elsewhere = await asyncio.to_thread(store_open.load_diff, db.db)
    assert (elsewhere.from_crawl, elsewhere.to_crawl) == (0, other_site.crawl_id)
    with pytest.raises(UsageError, match="no crawl with id 99"):
        await asyncio.to_thread(store_open.load_diff, db.db, 99, again)


def plain(links: list[BrokenLink]) -> list[BrokenLink]:
    """The links without their positions (these tests plant none)."""
    return [dataclasses.replace(link, locations=[]) for link in links]


def _first_plan(scope: Scope) -> Plan:
    """A site whose pages link every kind of target: pages, checks, skipped, out of scope."""

    def found(url: str, depth: int, element: str = "a", fragment: str = "") -> Discovered:
        whole = f"{url}#{fragment}" if fragment else url
        return scope.classify(whole, element=element, depth=depth)

    return Plan(
        results={
            u("home"): tagged('"h"'),
            u("about"): tagged('"a"'),
            u("deep"): tagged('"d"'),
            u("news"): tagged('"n"'),
            u("gone"): BROKEN,
        },
        children={
            u("home"): [
                found(u("about"), 1)._replace(line=3, column=7),
                found(u("about"), 1, fragment="team"),
                found(u("about"), 1, fragment=":~:text=x"),
                found(u("logo.png"), 1, "img")._replace(line=1, column=2000),
                found(u("gone"), 1),
                found(u("skip/me"), 1),
                found("mailto:x@a.test", 1),
                found("http://b.test/x", 1),
                found(u("deep"), 1, "img"),  # checked here, a page through about
                found(u("news"), 1),
            ],
            # Pages of one level linking to each other: whether a link is to a settled
            # page depends on which of them completed first (see ``lease``).
            u("about"): [
                found(u("home"), 2),
                found(u("deep"), 2),
                found(u("gone"), 2, "img"),
                found(u("news"), 2),
            ],
            u("news"): [found(u("about"), 2), found(u("deep"), 2)],
            u("deep"): [found(u("about"), 3, fragment="team"), found(u("far"), 3)],
        },
    )


async def _recrawl(
    db: Backend,
    first: int,
    config: dict[str, object],
    plan: Plan,
    *,
    by_reference: bool,
    lease: int = 1000,
) -> int:
    """A re-crawl where every page with validators answers 304: completed by reference, or
    with its links read and classified by the test (``recrawl.expand``); ``lease`` rows
    leased and completed at a time (1: a page's links to pages of its level completed
    before it are settled, where the first crawl, a level a commit, stored them open)."""
    settings = CrawlSettings(**config)  # type: ignore[arg-type]
    scope = Scope.build(settings, [u("home")])
    store = await recrawl_of(db, first, **config)
    await store.enqueue([disc(u("home"))], T0)
    for _ in range(40):
        leased = await store.lease("w1", lease, 30.0, T0)
        if not leased:
            return store.crawl_id
        pages = [row.url for row in leased if row.kind == UrlKind.PAGE]
        previous = await store.previous_pages(pages, with_links=not by_reference)
        outs = []
        for row in leased:
            page = previous.get(row.url)
            if page is None:
                result = plan.results.get(row.url, OK)
                outs.append(outcome(row, result, children=plan.children.get(row.url, ())))
                continue
            assert bool(page.links) is (not by_reference and bool(plan.children.get(row.url)))
            unchanged = Outcome(
                leased=row,
                result=tagged(page.etag, page.last_modified),
                recorded=Recorded(page.row, scope),
            )
            outs.append(unchanged if by_reference else recrawl.expand(unchanged, page.links))
        assert all(await store.complete("w1", outs, T0))
    raise AssertionError("the re-crawl did not converge")


async def _stored(db: Backend, crawl_id: int) -> tuple[object, ...]:
    rows = {
        url: (row.kind, row.state, row.depth, row.hop)
        for url, row in (await db.rows(crawl_id)).items()
    }
    positions = set(
        await db.fetch(
            "SELECT s.url, t.url, l.element, l.fragment, l.line, l.col FROM link l "
            "JOIN url s ON s.id = l.source_id JOIN url t ON t.id = l.target_id "
            "WHERE s.crawl_id = ?",
            crawl_id,
        )
    )
    report = await db.report(crawl_id)
    return rows, await db.results(crawl_id), positions, report.broken, report.summary.pages


@pytest.mark.parametrize(
    ("config", "lease"),
    [
        ({"exclude": ["/skip/"], "max_cache_age_s": 3600.0}, 1000),
        ({"include_fragments": True, "max_depth": 1}, 1000),
        ({"exclude": ["/skip/"], "max_urls": 1000}, 1000),
        ({"include_fragments": True}, 1),
        ({"include_fragments": True}, -1),
    ],
    ids=["cache-age", "fragments-depth", "max-urls", "a-page-a-commit", "first-a-page-a-commit"],
)
async def test_a_page_completed_by_reference_stores_what_its_recorded_links_would(
    db: Backend, config: dict[str, object], lease: int
) -> None:
    """``Outcome.recorded`` means the previous crawl's links as children: the same URL rows
    (kinds, depths, states), results, links with their positions, and report."""
    scope = Scope.build(CrawlSettings(**config), [u("home")])  # type: ignore[arg-type]
    plan = _first_plan(scope)
    first = await db.store(config)
    await first.enqueue([disc(u("home"))], T0)
    # lease -1: the first crawl a page a commit, the re-crawl a level a commit, so that
    # links the first crawl stored open are to pages the re-crawl has settled.
    await drain(first, plan, lease=1 if lease == -1 else 1000)
    assert await first.finish_if_quiescent(T0)
    lease = 1000 if lease == -1 else lease
    expanded = await _recrawl(db, first.crawl_id, config, plan, by_reference=False, lease=lease)
    referenced = await _recrawl(db, first.crawl_id, config, plan, by_reference=True, lease=lease)
    got, want = await _stored(db, referenced), await _stored(db, expanded)
    assert got == want
    # Each link in the same table too: a link to a page settled before it, in
    # this commit or an earlier one, is never searched for as a broken link's.
    assert await db.link_tables(referenced) == await db.link_tables(expanded)
    assert got[1] == (await _stored(db, first.crawl_id))[1]  # and the first crawl's results
    rows = got[0]
    assert isinstance(rows, dict)
    skipped = UrlKind.SKIP if "exclude" in config else UrlKind.PAGE
    assert (rows[u("skip/me")][0], rows["http://b.test/x"][0]) == (skipped, UrlKind.CHECK)
    assert rows[u("far")][0] == (UrlKind.CHECK if "max_depth" in config else UrlKind.PAGE)
